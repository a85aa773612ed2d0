#!/usr/bin/env bash
# -models DIR serves every .gguf there by file stem (first is the default); /health reports a
# model that fails to load as "error" (500) with the reason, and requests get 503, while the
# process keeps answering. Usage: models_dir.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"
DIR=$(dirname "$MODEL")
start_server M -models "$DIR"
IDS=$(curl -s --max-time 10 "$URL_M/v1/models" | jq -c '[.data[].id] | sort')
[ "$IDS" = '["pydoc-llama.F16","pydoc-llama.F32","pydoc-llama.Q8_0"]' ] || fail "models: $IDS"
for id in pydoc-llama.F32 pydoc-llama.Q8_0; do
  post "$URL_M" /v1/completions "{\"model\":\"$id\",\"prompt\":\"A list is\",\"max_tokens\":4,\"temperature\":0}"
  [ "$STATUS" = 200 ] && echo "$BODY" | jq -e --arg m "$id" '.model == $m' >/dev/null || fail "$id: $BODY"
done

# A model that cannot load: the server stays up and says why.
"$JITLLMD" serve -port 0 -port-file "$WORK/bad.port" -load "$WORK/missing.gguf" >"$WORK/bad.log" 2>&1 &
SERVER_PIDS+=($!)
for i in $(seq 1 100); do [ -s "$WORK/bad.port" ] && break; sleep 0.1; done
BAD="http://127.0.0.1:$(cat "$WORK/bad.port")"
for i in $(seq 1 100); do
  H=$(curl -s --max-time 5 "$BAD/health" | jq -r .status)
  [ "$H" = error ] && break
  sleep 0.1
done
curl -s --max-time 5 "$BAD/health" | jq -e '.status == "error" and (.message | test("missing.gguf"))' \
  >/dev/null || fail "health of a failed load: $(curl -s "$BAD/health")"
expect_error "$BAD" /v1/completions '{"prompt":"x"}' 503 '.code == "model_load_failed"'
echo "models_dir: 3 models served, failed load reported"
