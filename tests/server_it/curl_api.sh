#!/usr/bin/env bash
# jitllmd end to end with curl on 127.0.0.1 and the pydoc-llama fixture: health, models, greedy
# completion == `jitllm run`, streamed chat == non-streamed chat, stop strings, logprobs, n,
# /v1/systemone, metrics. Usage: curl_api.sh JITLLMD JITLLM
source "$(dirname "$0")/lib.bash" "$@"

start_server A --model "$MODEL" --alias pydoc --parallel 4
U=$URL_A

[ "$(curl -s --max-time 10 "$U/health" | jq -r .status)" = ok ] || fail "health"
curl -s --max-time 10 "$U/v1/models" | jq -e '.object == "list" and .data[0].id == "pydoc" and
  .data[0].object == "model"' >/dev/null || fail "models"

# Greedy completion over HTTP == jitllm run's output for the same prompt.
PROMPT="The function returns"
post "$U" /v1/completions "{\"model\":\"pydoc\",\"prompt\":\"$PROMPT\",\"max_tokens\":32,\"temperature\":0}"
[ "$STATUS" = 200 ] || fail "completion: $STATUS $BODY"
echo "$BODY" | jq -e '.object == "text_completion" and .choices[0].finish_reason == "length" and
  .usage.completion_tokens == 32 and .usage.prompt_tokens > 0' >/dev/null || fail "completion shape: $BODY"
HTTP_TEXT=$(echo "$BODY" | jq -r '.choices[0].text')
if [ -n "$JITLLM" ]; then
  RUN_TEXT=$("$JITLLM" run -m "$MODEL" -p "$PROMPT" -n 32 --temp 0 2>/dev/null)
  [ "$RUN_TEXT" = "$PROMPT$HTTP_TEXT" ] ||
    fail "HTTP greedy differs from jitllm run:"$'\n'"run : $RUN_TEXT"$'\n'"http: $PROMPT$HTTP_TEXT"
fi
# Token-id prompts and echo.
IDS=$(echo "$BODY" | jq -c '[1]')  # BOS alone is a valid prompt
post "$U" /v1/completions "{\"prompt\":$IDS,\"max_tokens\":4,\"temperature\":0}"
[ "$STATUS" = 200 ] || fail "token-id prompt: $BODY"
post "$U" /v1/completions "{\"prompt\":\"$PROMPT\",\"max_tokens\":3,\"temperature\":0,\"echo\":true}"
echo "$BODY" | jq -e --arg p "$PROMPT" '.choices[0].text | startswith($p)' >/dev/null || fail "echo: $BODY"

# Chat: streamed deltas concatenate to the non-streamed message; [DONE] ends; usage in the last
# chunk; a stream with include_usage ends with a choices-less usage chunk.
CHAT='"messages":[{"role":"system","content":"You answer briefly."},{"role":"user","content":"What does open() return?"}],"max_tokens":24,"temperature":0'
post "$U" /v1/chat/completions "{$CHAT}"
[ "$STATUS" = 200 ] || fail "chat: $BODY"
FULL=$(echo "$BODY" | jq -r '.choices[0].message.content')
echo "$BODY" | jq -e '.object == "chat.completion" and .choices[0].message.role == "assistant"' \
  >/dev/null || fail "chat shape: $BODY"
curl -sN --max-time 120 -H 'Content-Type: application/json' \
  -d "{$CHAT,\"stream\":true}" "$U/v1/chat/completions" >"$WORK/stream.txt"
[ "$(tail -n 2 "$WORK/stream.txt" | head -n 1)" = "data: [DONE]" ] || fail "stream does not end with [DONE]"
grep '^data: {' "$WORK/stream.txt" | sed 's/^data: //' >"$WORK/chunks.jsonl"
STREAMED=$(jq -rj '.choices[0].delta.content // empty' "$WORK/chunks.jsonl")
[ "$STREAMED" = "$FULL" ] || fail "streamed '$STREAMED' != non-streamed '$FULL'"
jq -s -e '.[0].choices[0].delta.role == "assistant" and (.[-1].usage.completion_tokens > 0) and
  (.[-1].choices[0].finish_reason != null) and all(.[]; .object == "chat.completion.chunk")' \
  "$WORK/chunks.jsonl" >/dev/null || fail "stream chunks: $(cat "$WORK/chunks.jsonl")"
curl -sN --max-time 120 -d "{$CHAT,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
  "$U/v1/chat/completions" | grep '^data: {' | sed 's/^data: //' | tail -n 1 |
  jq -e '.choices == [] and .usage.total_tokens > 0' >/dev/null || fail "include_usage chunk"

# Stop strings (across token boundaries): the text ends right before the stop.
STOP=${HTTP_TEXT:6:4}
post "$U" /v1/completions "$(jq -nc --arg p "$PROMPT" --arg s "$STOP" \
  '{prompt:$p,max_tokens:32,temperature:0,stop:[$s]}')"
echo "$BODY" | jq -e --arg t "${HTTP_TEXT%%"$STOP"*}" \
  '.choices[0].text == $t and .choices[0].finish_reason == "stop"' >/dev/null ||
  fail "stop '$STOP': $BODY"

# logprobs / top_logprobs, n choices, sampling with a seed is reproducible.
post "$U" /v1/chat/completions "{$CHAT,\"logprobs\":true,\"top_logprobs\":3,\"max_tokens\":5}"
echo "$BODY" | jq -e '(.choices[0].logprobs.content | length) == .usage.completion_tokens and
  all(.choices[0].logprobs.content[]; (.top_logprobs | length) == 3 and .logprob <= 0 and
  .top_logprobs[0].logprob >= .logprob)' >/dev/null || fail "logprobs: $BODY"
SEEDED='"prompt":"A list is","max_tokens":12,"temperature":0.9,"top_p":0.95,"seed":1234,"n":3'
post "$U" /v1/completions "{$SEEDED}"
A=$(echo "$BODY" | jq -c '[.choices[].text]')
post "$U" /v1/completions "{$SEEDED}"
B=$(echo "$BODY" | jq -c '[.choices[].text]')
[ "$A" = "$B" ] || fail "seeded sampling not reproducible: $A vs $B"
[ "$(echo "$A" | jq length)" = 3 ] || fail "n=3 gave $A"
post "$U" /v1/completions '{"prompt":"A list is","max_tokens":8,"temperature":0,"presence_penalty":1.5,"frequency_penalty":1.0,"repeat_penalty":1.3,"top_k":20,"min_p":0.05,"logit_bias":{"13":-100},"ignore_eos":true}'
[ "$STATUS" = 200 ] || fail "sampling options: $BODY"

# System One: yes/no, choice and score about one state; probabilities sum to 1.
post "$U" /v1/systemone '{"model":"pydoc","state":"The open() function returns a file object.",
  "questions":{"file":{"type":"noul","instructions":"Does open() return a file object?"},
  "kind":{"type":"choice","instructions":"What does open() return?","choices":["file object","list"]},
  "sure":{"type":"score","instructions":"How certain is the statement?","levels":[1,2,3]}}}'
[ "$STATUS" = 200 ] || fail "systemone: $BODY"
echo "$BODY" | jq -e '.model == "pydoc" and (.answers.file.p_yes >= 0 and .answers.file.p_yes <= 1)
  and (.answers.file.answer == "yes" or .answers.file.answer == "no")
  and ((.answers.kind.distribution | add) - 1 | fabs < 1e-6)
  and ((.answers.sure.distribution | add) - 1 | fabs < 1e-6) and .usage.prompt_tokens > 0' \
  >/dev/null || fail "systemone answer: $BODY"
# A long state asked twice: the second time its prefill is reused (in 64-token chunks) and the
# answer is the same.
STATE="The open() function returns a file object. Files should be closed with close() after use, or used in a with statement so that they are closed when the block ends. The mode argument selects reading or writing, text or binary, and the encoding argument names the codec."
SO=$(jq -nc --arg s "$STATE" '{state:$s,questions:{closed:{type:"noul",instructions:"Should files be closed?"}}}')
post "$U" /v1/systemone "$SO"
FIRST=$(echo "$BODY" | jq '.answers.closed.p_yes')
HITS=$(metric "$U" prefix_cache_hits_total)
post "$U" /v1/systemone "$SO"
echo "$BODY" | jq -e --argjson p "$FIRST" '.usage.cached_tokens >= 64 and .answers.closed.p_yes == $p'   >/dev/null || fail "systemone prefix reuse (first p_yes $FIRST): $BODY"
[ "$(metric "$U" prefix_cache_hits_total)" -gt "$HITS" ] || fail "prefix hit not counted"

# Metrics in Prometheus text.
curl -s --max-time 10 "$U/metrics" >"$WORK/metrics.txt"
for m in 'jitllm_generated_tokens_total [1-9]' '# TYPE jitllm_time_to_first_token_seconds histogram' \
  'jitllm_inter_token_latency_seconds_count [1-9]' 'jitllm_batch_size_bucket{le="1"}' \
  'jitllm_kv_pages_used{model="pydoc"}' 'jitllm_requests_total{endpoint="/v1/completions"} [1-9]'; do
  grep -q "^$m" "$WORK/metrics.txt" || fail "metrics lack '$m'"
done
echo "curl_api: all checks passed"
