#!/usr/bin/env bash
# The reliability sweep's ways to take jitllmd down or starve it, each kept fixed (issue 18):
# deep JSON on the chat route and in grammars, chunked and gzip bodies past --max-body, /metrics label injection,
# n past --parallel, a non-streaming client that leaves, slow clients holding the HTTP threads,
# SIGTERM with slow sockets open, a second server on a taken port, an unknown flag.
# Usage: hostile_limits.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"

start_server H --model "$MODEL" --alias pydoc --parallel 2 --max-body 65536 --header-timeout 2 \
  --client-connections 4
U=$URL_H
CC=/v1/chat/completions

# 1. Nesting deep enough to overflow a recursive dump(): 400, on the chat route too.
DEEP=$(printf '[%.0s' $(seq 1 20000))$(printf ']%.0s' $(seq 1 20000))
printf '{"messages":[{"role":"user","content":"hi","x":%s}]}' "$DEEP" >"$WORK/deep.json"
STATUS=$(curl -s -o "$WORK/deep.out" -w '%{http_code}' --max-time 10 --data-binary @"$WORK/deep.json" "$U$CC")
[ "$STATUS" = 400 ] && grep -q "levels deep" "$WORK/deep.out" || fail "deep message: $STATUS $(head -c 300 "$WORK/deep.out")"
printf '{"messages":[{"role":"user","content":"hi"}],"tools":%s}' "$DEEP" >"$WORK/deep_tools.json"
STATUS=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --data-binary @"$WORK/deep_tools.json" "$U$CC")
[ "$STATUS" = 400 ] || fail "deep tools: $STATUS"
# ... and in a grammar, whose groups the GBNF parser reads by recursion (it crashed at 50,000).
python3 -c "import json; d = 30000; print(json.dumps({'prompt': 'x', 'max_tokens': 1,
  'grammar': 'root ::= ' + '(' * d + '\"a\"' + ')' * d}))" >"$WORK/deep_gbnf.json"
STATUS=$(curl -s -o "$WORK/deep_gbnf.out" -w '%{http_code}' --max-time 10 --data-binary @"$WORK/deep_gbnf.json" "$U/v1/completions")
[ "$STATUS" = 400 ] && grep -q "nest more than" "$WORK/deep_gbnf.out" || fail "deep grammar: $STATUS $(head -c 300 "$WORK/deep_gbnf.out")"

# ... a grammar that is exponentially ambiguous (2^30 ways after "x"): a quick 400, nothing held.
python3 -c "import json; print(json.dumps({'prompt': 'x', 'max_tokens': 3,
  'grammar': 'root ::= \"x\"' + ' a' * 30 + ' \"y\"\na ::= \"\" | \"\"'}))" >"$WORK/ambiguous.json"
START=$(date +%s%N)
STATUS=$(curl -s -o "$WORK/ambiguous.out" -w '%{http_code}' --max-time 60 --data-binary @"$WORK/ambiguous.json" "$U/v1/completions")
ELAPSED_MS=$(( ($(date +%s%N) - START) / 1000000 ))
[ "$STATUS" = 400 ] && grep -q "too ambiguous" "$WORK/ambiguous.out" || fail "ambiguous grammar: $STATUS $(head -c 300 "$WORK/ambiguous.out")"
[ "$ELAPSED_MS" -lt 5000 ] || fail "the ambiguous grammar took $ELAPSED_MS ms"

# Range headers (one response copied per range) and multipart bodies are refused before routing.
RANGES="Range: bytes=0-$(printf ',0-%.0s' $(seq 1 1023))"
STATUS=$(curl -s -o "$WORK/range.out" -w '%{http_code}' --max-time 10 -H "$RANGES" \
  -d '{"content": "a few words"}' "$U/tokenize")
[ "$STATUS" = 416 ] && [ "$(stat -c %s "$WORK/range.out")" -lt 4096 ] || fail "ranges: $STATUS"
STATUS=$(curl -s -o "$WORK/multipart.out" -w '%{http_code}' --max-time 10 -F a=b "$U/v1/completions")
[ "$STATUS" = 415 ] || fail "multipart body: $STATUS $(head -c 200 "$WORK/multipart.out")"

# Fields the server does not honour are refused by name; llama-server's n_predict is honoured.
post "$U" /v1/completions '{"prompt": "x", "suffix": "y"}'
[ "$STATUS" = 400 ] && echo "$BODY" | jq -e '.error.param == "suffix"' >/dev/null || fail "suffix: $STATUS $BODY"
post "$U" /v1/completions '{"prompt": "x", "n_predict": 3, "ignore_eos": true}'
[ "$STATUS" = 200 ] && echo "$BODY" | jq -e '.usage.completion_tokens == 3' >/dev/null || fail "n_predict: $STATUS $BODY"

# 5. Bodies are counted as decoded: chunked and gzip past --max-body get 413, quickly.
head -c 1000000 /dev/zero | tr '\0' 'a' >"$WORK/big.txt"
START=$(date +%s%N)
STATUS=$(curl -s -o "$WORK/chunked.out" -w '%{http_code}' --max-time 20 -H 'Transfer-Encoding: chunked' \
  --data-binary @"$WORK/big.txt" "$U/v1/completions")
[ "$STATUS" = 413 ] || fail "chunked body past the limit: $STATUS $(head -c 200 "$WORK/chunked.out")"
{ printf '{"prompt": "'; head -c 50000000 /dev/zero | tr '\0' 'a'; printf '"}'; } | gzip -c >"$WORK/bomb.gz"
[ "$(stat -c %s "$WORK/bomb.gz")" -lt 65536 ] || fail "the gzip body should be under --max-body itself"
STATUS=$(curl -s -o "$WORK/gzip.out" -w '%{http_code}' --max-time 20 -H 'Content-Encoding: gzip' \
  --data-binary @"$WORK/bomb.gz" "$U/v1/completions")
[ "$STATUS" = 413 ] || fail "gzip body inflating past the limit: $STATUS $(head -c 200 "$WORK/gzip.out")"
ELAPSED_MS=$(( ($(date +%s%N) - START) / 1000000 ))
[ "$ELAPSED_MS" -lt 5000 ] || fail "refusing the large bodies took $ELAPSED_MS ms"
RSS_KB=$(awk '/VmRSS/ {print $2}' "/proc/$PID_H/status")
[ "$RSS_KB" -lt 1000000 ] || fail "RSS $RSS_KB kB after the large bodies"

# 7. /metrics: unknown paths are one "other" label; quotes and newlines cannot forge series.
curl -s -o /dev/null --max-time 5 "$U/v1/x%22%7D%201e9%0Ajitllm_injected_metric%7Ba%3D%22b%22%7D%201"
for i in $(seq 1 50); do curl -s -o /dev/null --max-time 5 "$U/v1/path$i"; done
METRICS=$(curl -s --max-time 5 "$U/metrics")
echo "$METRICS" | grep -q '^jitllm_injected_metric' && fail "a forged series in /metrics"
[ "$(echo "$METRICS" | grep -c '^jitllm_requests_total')" -le 7 ] || fail "a label per path: $(echo "$METRICS" | grep requests_total)"

# 9. n counts against --parallel.
expect_error "$U" /v1/completions '{"prompt": "x", "n": 3, "max_tokens": 2}' 400 '.param == "n"'

# 10. A non-streaming request whose client leaves is cancelled, not run to its end.
CANCELLED=$(metric "$U" sessions_cancelled_total)
curl -s -o /dev/null --max-time 0.08 -d '{"prompt":"The module provides","max_tokens":500,"ignore_eos":true}' \
  "$U/v1/completions" || true
for i in $(seq 1 100); do
  [ "$(metric "$U" sessions_cancelled_total)" -gt "$CANCELLED" ] && break
  sleep 0.1
done
[ "$(metric "$U" sessions_cancelled_total)" -gt "$CANCELLED" ] || fail "a non-streaming disconnect was not cancelled"

# 6. Slowloris: 16 connections sending a header line every second; /health still answers.
slow_client() {
  exec 3<>"/dev/tcp/127.0.0.1/${U##*:}"
  printf 'GET /health HTTP/1.1\r\nHost: x\r\n' >&3
  for i in $(seq 1 30); do printf 'X-Slow-%s: 1\r\n' "$i" >&3 2>/dev/null || exit 0; sleep 1; done
}
SLOW=()
for i in $(seq 1 16); do slow_client & SLOW+=($!); done
sleep 1
for i in 1 2 3; do
  STATUS=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$U/health")
  [ "$STATUS" = 200 ] || fail "/health behind slow clients: $STATUS"
  sleep 0.5
done
# ... and connections that send nothing, from 24 loopback addresses (each under its address's
# cap), more than the server's 12 HTTP threads: /health still answers at once (it waited out the
# 2 s header timeout behind them before).
python3 - "${U##*:}" <<'PY' || fail "/health behind silent connections from many addresses"
import http.client, socket, sys, time
port = int(sys.argv[1])
held = []
for i in range(24):
    s = socket.socket()
    s.bind((f"127.0.0.{2 + i}", 0))
    s.connect(("127.0.0.1", port))
    held.append(s)
time.sleep(0.3)
for _ in range(3):
    t = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/health")
    status = c.getresponse().status
    took = time.time() - t
    if status != 200 or took > 1.0:
        sys.exit(f"/health: {status} after {took:.2f} s")
PY
# SIGTERM with slow sockets open: gone within the drain timeout (nothing is in flight).
kill -TERM "$PID_H"
START=$(date +%s)
RC=0
for i in $(seq 1 100); do kill -0 "$PID_H" 2>/dev/null || break; sleep 0.1; done
wait "$PID_H" || RC=$?
[ "$RC" = 0 ] || fail "jitllmd exited $RC after SIGTERM"
[ $(( $(date +%s) - START )) -le 5 ] || fail "SIGTERM with slow sockets took $(( $(date +%s) - START )) s"
for p in "${SLOW[@]}"; do kill "$p" 2>/dev/null || true; done

# 11. Large requests on many HTTP threads: the memory comes back (arenas capped, trimmed after).
start_server R --model "$MODEL" --max-body 4194304
{ printf '{"messages":[{"role":"user","content":"'; head -c 1000000 /dev/zero | tr '\0' 'a'; printf '"}]}'; } >"$WORK/large_chat.json"
CURLS=()
for i in $(seq 1 12); do
  curl -s -o /dev/null --max-time 120 --data-binary @"$WORK/large_chat.json" "$URL_R$CC" & CURLS+=($!)
done
for p in "${CURLS[@]}"; do wait "$p" || true; done
sleep 0.5
RSS_KB=$(awk '/VmRSS/ {print $2}' "/proc/$PID_R/status")
echo "RSS after 12 concurrent 1 MB chats: $RSS_KB kB"
[ "$RSS_KB" -lt 600000 ] || fail "RSS $RSS_KB kB after 12 large chats"
post "$URL_R" /v1/completions '{"prompt": "A list is", "max_tokens": 2}'
[ "$STATUS" = 200 ] || fail "after the large chats: $STATUS $BODY"

# 13. A taken port: the second server fails with exit 1 instead of sharing it.
start_server P --model "$MODEL"
PORT=${URL_P##*:}
set +e
timeout 30 "$JITLLMD" serve --host 127.0.0.1 --port "$PORT" --model "$MODEL" >"$WORK/second.log" 2>&1
RC=$?
set -e
[ "$RC" = 1 ] && grep -q "in use" "$WORK/second.log" || fail "second bind: exit $RC, $(tail -2 "$WORK/second.log")"

# 18. An unknown flag is reported as unknown (also as the last argument, where it was taken for
# one lacking a value), with the nearest known one; usage errors exit 2.
set +e
OUT=$("$JITLLMD" serve --model "$MODEL" -bogus 2>&1)
RC=$?
OUT2=$("$JITLLMD" serve --model "$MODEL" --prallel 2 2>&1)
RC2=$?
OUT3=$("$JITLLMD" srve 2>&1)
RC3=$?
set -e
[ "$RC" = 2 ] && echo "$OUT" | grep -q "not expected: -bogus" || fail "unknown flag: $RC $OUT"
[ "$RC2" = 2 ] && echo "$OUT2" | grep -q "did you mean --parallel" || fail "misspelled flag: $RC2 $OUT2"
[ "$RC3" = 2 ] && echo "$OUT3" | grep -q "did you mean serve" || fail "misspelled command: $RC3 $OUT3"
echo "hostile_limits: all checks passed"
