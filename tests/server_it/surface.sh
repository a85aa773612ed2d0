#!/usr/bin/env bash
# The surface clients and operators probe for (issue 25, server side): llama-server's /tokenize,
# /detokenize, /props and /slots; CORS (a preflight answered for an allowed origin, nothing for
# others); the startup lines and one access line per request, as text and as JSON; --version;
# llama.cpp's short flags (-np, -ngl, -c) and the old single-dash names (with a deprecation note).
# Usage: surface.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"

"$JITLLMD" --version | grep -Eq '^jitllmd [0-9.]+ \(commit [0-9a-f]+' || fail "--version: $("$JITLLMD" --version)"

start_server S -m "$MODEL" --alias pydoc -np 2 -ngl 0 -c 256 --cors 'http://app.example'
U=$URL_S

# /tokenize and /detokenize round trip; pieces; add_special adds BOS.
post "$U" /tokenize '{"content": "A list is"}'
[ "$STATUS" = 200 ] || fail "tokenize: $BODY"
IDS=$(echo "$BODY" | jq -c .tokens)
post "$U" /tokenize '{"content": "A list is", "add_special": true, "with_pieces": true}'
echo "$BODY" | jq -e --argjson ids "$IDS" '(.tokens | length) == ($ids | length) + 1 and
  (.tokens[1:] | map(.id)) == $ids and (.tokens[1].piece | type == "string")' >/dev/null ||
  fail "tokenize with pieces: $BODY"
post "$U" /detokenize "{\"tokens\": $IDS}"
[ "$STATUS" = 200 ] && echo "$BODY" | jq -e '.content | test("A list is")' >/dev/null || fail "detokenize: $BODY"
expect_error "$U" /tokenize '{"content": 5}' 400 '.param == "content"'
expect_error "$U" /detokenize '{"tokens": [1, -1]}' 400 '.param == "tokens"'
expect_error "$U" /tokenize '{"content": "x", "model": "nope"}' 404 '.code == "model_not_found"'

# /props: what a client configures itself by (-c 256 and -np 2 from llama.cpp's spellings).
PROPS=$(curl -s --max-time 5 "$U/props")
echo "$PROPS" | jq -e '.model == "pydoc" and .n_ctx == 256 and .total_slots == 2 and
  (.chat_template | length > 0) and .default_generation_settings.temperature == 1 and
  (.build_info | test("commit"))' >/dev/null || fail "props: $PROPS"

# /slots while a request runs: one decoding sequence, then none.
curl -s -o /dev/null --max-time 60 -d '{"prompt":"The module provides","max_tokens":200,"ignore_eos":true}' "$U/v1/completions" &
BUSY=$!
SEEN=0
for i in $(seq 1 200); do
  N=$(curl -s --max-time 5 "$U/slots" | jq '.slots | length')
  [ "$N" -ge 1 ] && { SEEN=1; break; }
  sleep 0.01
done
wait "$BUSY"
[ "$SEEN" = 1 ] || fail "/slots never showed the running sequence"
curl -s --max-time 5 "$U/slots" | jq -e '.total_slots == 2 and (.slots | length) == 0' >/dev/null || fail "slots after"

# CORS: an allowed origin's preflight gets the methods and headers; another origin nothing.
HDRS=$(curl -s -i -X OPTIONS -H 'Origin: http://app.example' -H 'Access-Control-Request-Method: POST' \
  --max-time 5 "$U/v1/chat/completions")
echo "$HDRS" | grep -q '^HTTP/1.1 204' && echo "$HDRS" | grep -qi '^Access-Control-Allow-Origin: http://app.example' &&
  echo "$HDRS" | grep -qi '^Access-Control-Allow-Headers: .*Authorization' || fail "preflight: $HDRS"
curl -s -i -H 'Origin: http://app.example' --max-time 5 "$U/health" | grep -qi '^Access-Control-Allow-Origin: http://app.example' ||
  fail "no CORS header on an allowed origin's request"
curl -s -i -H 'Origin: http://evil.example' --max-time 5 "$U/health" | grep -qi '^Access-Control-Allow-Origin' &&
  fail "CORS header for an origin not allowed"

# The log: a listening line, the model, one access line per request with its tokens.
post "$U" /v1/completions '{"prompt": "A list is", "max_tokens": 3, "temperature": 0}'
sleep 0.2
grep -q 'info: listening url=http://127.0.0.1' "$WORK/S.log" || fail "no listening line: $(head -3 "$WORK/S.log")"
grep -q 'info: model ready model=pydoc .*kernels=' "$WORK/S.log" || fail "no model line"
grep -Eq 'info: request id=cmpl-[0-9a-f]+ method=POST route=/v1/completions status=200 .*prompt_tokens=[0-9]+ completion_tokens=3 ttft_ms=' "$WORK/S.log" ||
  fail "no access line: $(grep request "$WORK/S.log" | tail -2)"

# JSON lines, and the old spellings still start a server (with a note).
start_server J -load "$MODEL" -parallel 1 --log-format json
post "$URL_J" /v1/completions '{"prompt": "A list is", "max_tokens": 2}'
sleep 0.2
grep -q -- '-load is deprecated: use --load' "$WORK/J.log" || fail "no deprecation note"
grep '^{' "$WORK/J.log" | jq -e -s 'map(select(.msg == "request" and .route == "/v1/completions" and .status == 200
  and .completion_tokens == 2)) | length == 1' >/dev/null || fail "JSON access line: $(grep request "$WORK/J.log")"
# --chat-template by built-in name: /props shows it, and a chat is rendered with it (the prompt's
# tokens are those of the Llama 3 format, counted by /tokenize).
start_server T -m "$MODEL" -np 1 --chat-template llama3
curl -s --max-time 5 "$URL_T/props" | jq -e '.chat_template | startswith("{{- bos_token -}}") and contains("<|eot_id|>")' \
  >/dev/null || fail "props of --chat-template llama3"
post "$URL_T" /v1/chat/completions '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}'
[ "$STATUS" = 200 ] || fail "chat with --chat-template llama3: $BODY"
PROMPT_TOKENS=$(jq -e '.usage.prompt_tokens' <<< "$BODY")
TEXT=$(jq -n '"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"')
post "$URL_T" /tokenize "{\"content\": $TEXT, \"add_special\": true, \"parse_special\": true}"
[ "$STATUS" = 200 ] || fail "tokenize: $BODY"
[ "$PROMPT_TOKENS" = "$(jq '.tokens | length' <<< "$BODY")" ] ||
  fail "llama3 template prompt: $PROMPT_TOKENS tokens, the format has $(jq '.tokens | length' <<< "$BODY")"
expect_error "$URL_T" /tokenize '{"content": "x", "with_pices": true}' 400 '.param == "with_pices"'
if "$JITLLMD" serve -m "$MODEL" --chat-template nosuch --port 0 2> "$WORK/tmpl.err"; then fail "unknown template name served"; fi
grep -q "not a built-in template" "$WORK/tmpl.err" || fail "template error: $(cat "$WORK/tmpl.err")"
# llama-server's -fa / -ctk spellings: what jitllm cannot do is refused at start, not ignored.
if "$JITLLMD" serve -m "$MODEL" -ctk q8_0 -ctv q8_0 --port 0 2> "$WORK/ctk.err"; then fail "-ctk q8_0 served"; fi
grep -q "quantized KV cache is not supported" "$WORK/ctk.err" || fail "-ctk message: $(cat "$WORK/ctk.err")"
start_server F -m "$MODEL" -np 1 -fa on -ctk f32 -ctv f32
echo "surface: all checks passed"
