#!/usr/bin/env bash
# Hostile and wrong requests each get their 4xx with an OpenAI error body and never hurt the
# server; --api-key is enforced with 401; a client that disconnects mid-stream frees its session
# (seen in /metrics); SIGTERM drains the request in flight and exits 0.
# Usage: hostile.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"

start_server H --model "$MODEL" --alias pydoc --parallel 2 --max-body 65536
U=$URL_H
C=/v1/completions
expect_error "$U" $C '{"prompt": "x",,}' 400 '.message | test("not valid JSON")'
expect_error "$U" $C '{"prompt": "x", "temperature": NaN}' 400
expect_error "$U" $C '[1, 2, 3]' 400
expect_error "$U" $C '{"prompt": "x", "temperature": "hot"}' 400 '.param == "temperature"'
expect_error "$U" $C '{"prompt": "x", "temperature": -1}' 400 '.param == "temperature"'
expect_error "$U" $C '{"prompt": "x", "top_p": 1e400}' 400
expect_error "$U" $C '{"prompt": "x", "max_tokens": -5}' 400 '.param == "max_tokens"'
expect_error "$U" $C '{"prompt": "x", "max_tokens": 2.5}' 400 '.param == "max_tokens"'
expect_error "$U" $C '{"prompt": "x", "n": 0}' 400 '.param == "n"'
expect_error "$U" $C '{"prompt": "x", "stop": ["a","b","c","d","e"]}' 400 '.param == "stop"'
expect_error "$U" $C '{"prompt": "x", "logit_bias": {"99999": 1}}' 400 '.param == "logit_bias"'
expect_error "$U" $C '{"prompt": "x", "logit_bias": {"abc": 1}}' 400 '.param == "logit_bias"'
expect_error "$U" $C '{"prompt": [1, -3]}' 400 '.param == "prompt"'
expect_error "$U" $C '{"prompt": [1, 70000]}' 400 '.param == "prompt"'
expect_error "$U" $C '{"max_tokens": 3}' 400 '.param == "prompt"'
expect_error "$U" $C '{"prompt": "x", "model": "no-such-model"}' 404 '.code == "model_not_found"'
LONG=$(printf 'the function returns %.0s' $(seq 1 300))
expect_error "$U" $C "{\"prompt\": \"$LONG\"}" 400 '.code == "context_length_exceeded"'
expect_error "$U" $C '{"prompt": "x", "max_tokens": 100000}' 400 \
  '.code == "context_length_exceeded" and .param == "max_tokens"'
BIG=$(head -c 100000 /dev/zero | tr '\0' 'a')
expect_error "$U" $C "{\"prompt\": \"$BIG\"}" 413
CC=/v1/chat/completions
expect_error "$U" $CC '{"messages": []}' 400 '.param == "messages"'
expect_error "$U" $CC '{"messages": [{"role": "wizard", "content": "hi"}]}' 400
expect_error "$U" $CC '{"messages": "hi"}' 400
expect_error "$U" $CC '{"messages": [{"role":"user","content":"hi"}], "top_logprobs": 50, "logprobs": true}' 400
expect_error "$U" /v1/systemone '{"state": "s", "questions": {"q": {"type": "guess", "instructions": "?"}}}' 400
expect_error "$U" /v1/systemone '{"state": "s", "questions": {"q": {"type": "choice", "instructions": "?", "choices": ["a"]}}}' 400
expect_error "$U" /v1/systemone "{\"state\": \"$LONG\", \"questions\": {\"q\": {\"type\": \"noul\", \"instructions\": \"?\"}}}" \
  400 '.code == "context_length_exceeded"'
STATUS=$(curl -s -o "$WORK/nf.json" -w '%{http_code}' --max-time 10 "$U/v1/nothing")
[ "$STATUS" = 404 ] && jq -e '.error.message' "$WORK/nf.json" >/dev/null || fail "unknown route: $STATUS"
# Still serving after all that.
post "$U" $C '{"prompt": "A list is", "max_tokens": 4, "temperature": 0}'
[ "$STATUS" = 200 ] || fail "server unhealthy after hostile requests: $BODY"
[ "$(metric "$U" requests_failed_total)" -ge 25 ] || fail "failed requests not counted"

# A client that goes away mid-stream: its session is freed at the next step.
CANCELLED=$(metric "$U" sessions_cancelled_total)
curl -sN --max-time 120 -d '{"prompt":"The module provides","max_tokens":400,"ignore_eos":true,"stream":true}' \
  "$U$C" | head -n 3 >/dev/null || true
for i in $(seq 1 100); do
  [ "$(metric "$U" sessions_cancelled_total)" -gt "$CANCELLED" ] &&
    [ "$(metric "$U" 'sessions_active{model="pydoc"}')" = 0 ] && break
  sleep 0.1
done
[ "$(metric "$U" sessions_cancelled_total)" -gt "$CANCELLED" ] || fail "disconnect not seen"
[ "$(metric "$U" 'sessions_active{model="pydoc"}')" = 0 ] || fail "session of a gone client still active"

# --api-key: 401 without or with a wrong key, 200 with it; /health stays open.
start_server K --model "$MODEL" --api-key s3cret
expect_error "$URL_K" $C '{"prompt": "x", "max_tokens": 1}' 401 '.code == "invalid_api_key"'
post "$URL_K" $C '{"prompt": "x", "max_tokens": 1}' -H 'Authorization: Bearer wrong'
[ "$STATUS" = 401 ] || fail "wrong key: $STATUS"
post "$URL_K" $C '{"prompt": "x", "max_tokens": 1}' -H 'Authorization: Bearer s3cret'
[ "$STATUS" = 200 ] || fail "right key: $STATUS $BODY"
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL_K/health")" = 200 ] || fail "health behind key"
# A POST refused for its key has its body unread: the connection ends with the 401, so a request
# sent as that body is not answered as the connection's next one (it was, before the fix).
SMUGGLED=$'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n\r\n'
exec 3<>"/dev/tcp/127.0.0.1/${URL_K##*:}"
printf 'POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Length: %d\r\n\r\n%s' \
  "$C" "${#SMUGGLED}" "$SMUGGLED" >&3
ANSWERS=$(timeout 8 cat <&3 || true)
exec 3<&-
[ "$(grep -o 'HTTP/1\.1 [0-9]' <<<"$ANSWERS" | wc -l)" = 1 ] && grep -q '^HTTP/1.1 401' <<<"$ANSWERS" ||
  fail "a refused POST's body was answered as a request: $ANSWERS"

# SIGTERM while a request is in flight: it completes, then the server exits 0.
curl -s --max-time 120 -d '{"prompt":"The class","max_tokens":120,"ignore_eos":true,"temperature":0}' \
  "$URL_K$C" -H 'Authorization: Bearer s3cret' >"$WORK/inflight.json" &
CURL=$!
# More of them, so the drain lasts long enough to be seen from outside (one took ~0.1 s).
EXTRA=()
for i in 1 2 3 4 5 6 7 8; do
  curl -s -o /dev/null --max-time 120 -d '{"prompt":"A list","max_tokens":120,"ignore_eos":true}' \
    "$URL_K$C" -H 'Authorization: Bearer s3cret' &
  EXTRA+=($!)
done
for i in $(seq 1 100); do
  [ "$(metric "$URL_K" 'sessions_active{model="pydoc-llama.Q8_0"}')" -ge 1 ] 2>/dev/null && break
  sleep 0.05
done
# /health, open without the key, tells nothing of the machine (no paths; item 14).
HEALTH=$(curl -s --max-time 5 "$URL_K/health")
[ "$HEALTH" = '{"status":"ok"}' ] || fail "/health says more than its status: $HEALTH"
kill -TERM "$PID_K"
# Draining is not ready (item 18): load balancers take the server out while the request finishes.
for i in $(seq 1 200); do  # the signal is handled asynchronously
  HEALTH_STATUS=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL_K/health" || true)
  [ "$HEALTH_STATUS" = 503 ] && break
done
[ "$HEALTH_STATUS" = 503 ] || fail "/health while draining: $HEALTH_STATUS"
wait "$CURL" || fail "in-flight request failed during drain"
for p in "${EXTRA[@]}"; do wait "$p" || fail "an in-flight request failed during drain"; done
jq -e '.usage.completion_tokens == 120' "$WORK/inflight.json" >/dev/null ||
  fail "drained request incomplete: $(cat "$WORK/inflight.json")"
RC=0
for i in $(seq 1 100); do kill -0 "$PID_K" 2>/dev/null || break; sleep 0.1; done
wait "$PID_K" || RC=$?
[ "$RC" = 0 ] || fail "jitllmd exited $RC after SIGTERM"
echo "hostile: all checks passed"
