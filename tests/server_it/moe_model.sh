#!/usr/bin/env bash
# jitllmd on a mixture-of-experts model (jitllm synth tiny-moe: qwen3moe, 8 experts, 2 a token,
# Q4_K_M): completions, a streamed chat and /v1/systemone answer as on a dense model, and greedy
# decoding gives the same text as `jitllm run` on the same file. Usage: moe_model.sh JITLLMD JITLLM
source "$(dirname "$0")/lib.bash" "$@"
[ -n "$JITLLM" ] || fail "needs the jitllm path as \$2"
M="$WORK/tiny-moe.gguf"
"$JITLLM" synth --shape tiny-moe --type q4_k_m --seed 5 "$M" >"$WORK/synth.log" 2>&1 || fail "synth"
start_server M --model "$M" --alias moe
post "$URL_M" /v1/completions '{"prompt":"hello world","max_tokens":12,"temperature":0}'
[ "$STATUS" = 200 ] || fail "completions: $BODY"
TEXT=$(echo "$BODY" | jq -r '.choices[0].text')
[ "$(echo "$BODY" | jq '.usage.completion_tokens')" = 12 ] || fail "completions usage: $BODY"
# The same greedy continuation from the CLI.
RUN=$("$JITLLM" run -m "$M" -p "hello world" -n 12 --temp 0 2>/dev/null)
[ "$RUN" = "hello world$TEXT" ] || fail "jitllm run gave '$RUN', the server '$TEXT'"
post "$URL_M" /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"stream":true,"temperature":0}'
[ "$STATUS" = 200 ] || fail "chat stream: $BODY"
# Content chunks (an end-of-text token may come before the sixth), a finish reason, [DONE].
grep -q '"delta":{"content":' <<< "$BODY" || fail "chat stream without content: $BODY"
grep -qE '"finish_reason":"(length|stop)"' <<< "$BODY" || fail "chat stream without a finish: $BODY"
grep -q '^data: \[DONE\]' <<< "$BODY" || fail "chat stream without [DONE]: $BODY"
post "$URL_M" /v1/systemone '{"state":"The cat sat on the mat.","questions":{"c":{"type":"choice","instructions":"Where?","choices":["mat","roof"]}}}'
[ "$STATUS" = 200 ] || fail "systemone: $BODY"
echo "$BODY" | jq -e '.answers.c.distribution | add | . > 0.999999 and . < 1.000001' >/dev/null ||
  fail "systemone distribution: $BODY"
echo "moe_model: completions == jitllm run, streamed chat and systemone ok"
