#!/usr/bin/env bash
# /v1/responses on the bundled demo model: the SSE wire format checked raw (every event named,
# its name == its data's type, no [DONE]), then responses_sdk.mjs drives the official OpenAI
# Node SDK; raw bad bodies, a client leaving mid-stream, and a generation that fails (a NaN
# embedding row, edit_hf.py) ending a stream with error + response.failed. Skipped (exit 77)
# when Node or the SDK is not installed (scripts/setup-deps).
# Usage: responses_sdk.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -f "$HERE/node_modules/openai/package.json" ] ||
  { echo "SKIP: run 'npm ci --prefix tests/server_it' (scripts/setup-deps does)"; exit 77; }
start_server R --parallel 4
curl -sN --max-time 60 -H 'Content-Type: application/json' "$URL_R/v1/responses" \
  -d '{"input": "Hello", "max_output_tokens": 8, "stream": true}' >"$WORK/sse.txt" ||
  fail "streamed /v1/responses"
head -1 "$WORK/sse.txt" | grep -qx 'event: response.created' || fail "first event: $(head -3 "$WORK/sse.txt")"
grep -q '^data: \[DONE\]' "$WORK/sse.txt" && fail "a Responses stream has no [DONE]"
# Each event: an 'event:' line, a 'data:' line whose type is that name, a blank line.
awk '/^event: / { name = substr($0, 8); n++; next }
     /^data: / { if (index($0, "{\"type\":\"" name "\"") != 7) { print "mismatch: " name " / " $0; bad = 1 }; next }
     /^$/ { next }
     { print "stray line: " $0; bad = 1 }
     END { if (n < 8 || bad) exit 1 }' "$WORK/sse.txt" || fail "SSE wire format: $(cat "$WORK/sse.txt")"
tail -2 "$WORK/sse.txt" | grep -q '^data: {"type":"response.\(completed\|incomplete\)"' ||
  fail "last event: $(tail -2 "$WORK/sse.txt")"
timeout 120 node "$HERE/responses_sdk.mjs" "$URL_R" || fail "responses SDK checks"

U=$URL_R
expect_error "$U" /v1/responses '{"input": "x",,}' 400 '.message | test("not valid JSON")'
expect_error "$U" /v1/responses '[{"input": "x"}]' 400
expect_error "$U" /v1/responses '{"input": "x", "truncation": "middle"}' 400 '.param == "truncation"'
expect_error "$U" /v1/responses '{"input": "x", "bogus": 1}' 400 '.code == "unknown_parameter"'
expect_error "$U" /v1/responses '{"model": "nope", "input": "x"}' 404 '.code == "model_not_found"'
[ "$(metric "$U" 'requests_total{endpoint="/v1/responses"}')" -ge 20 ] || fail "requests not counted"

# A client that goes away mid-stream: its session is freed at the next step.
CANCELLED=$(metric "$U" sessions_cancelled_total)
curl -sN --max-time 60 -H 'Content-Type: application/json' "$U/v1/responses" \
  -d '{"input": "Hello", "max_output_tokens": 400, "ignore_eos": true, "stream": true}' |
  head -n 12 >/dev/null || true
for i in $(seq 1 100); do
  [ "$(metric "$U" sessions_cancelled_total)" -gt "$CANCELLED" ] &&
    [ "$(metric "$U" 'sessions_active{model="default"}')" = 0 ] && break
  sleep 0.1
done
[ "$(metric "$U" sessions_cancelled_total)" -gt "$CANCELLED" ] || fail "disconnect not seen"
[ "$(metric "$U" 'sessions_active{model="default"}')" = 0 ] || fail "session of a gone client still active"

# A generation that fails: token 1859 (the word-final "a" of "extra") has a NaN embedding row.
export XDG_CACHE_HOME=$WORK/cache  # the edited folder is converted into it
python3 "$HERE/edit_hf.py" "$SHARED/oracle/pydoc-llama/hf" "$WORK/nan" nan 1859
start_server N --model "$WORK/nan" --alias nan
expect_error "$URL_N" /v1/responses '{"input": "extra", "max_output_tokens": 4}' 500 \
  '.code == "model_output_invalid"'
curl -sN --max-time 60 -H 'Content-Type: application/json' "$URL_N/v1/responses" \
  -d '{"input": "extra", "max_output_tokens": 4, "stream": true}' >"$WORK/failed.txt" || fail "failed stream"
grep -A1 -x 'event: error' "$WORK/failed.txt" | grep -q '"code":"model_output_invalid"' ||
  fail "no error event: $(cat "$WORK/failed.txt")"
tail -2 "$WORK/failed.txt" | sed -n 's/^data: //p' | jq -e '.type == "response.failed" and
  .response.status == "failed" and .response.error.code == "model_output_invalid"' >/dev/null ||
  fail "not ended by response.failed: $(cat "$WORK/failed.txt")"
post "$URL_N" /v1/responses '{"input": "hello", "max_output_tokens": 4}'
[ "$STATUS" = 200 ] || fail "after the failed generation: $STATUS $BODY"
echo "responses_sdk: ok"
