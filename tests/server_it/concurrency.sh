#!/usr/bin/env bash
# 16 simultaneous streaming clients on loopback: every one gets its full answer, equal to the
# answer the same request gets alone (sequences stepped together do not leak into each other:
# --deterministic, the batch-invariant steps, is what promises it).
# Greedy, 16 different prompts, 16 tokens each; the prefix cache is off so that "alone" and
# "together" run the same prompt tokens. Usage: concurrency.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"

start_server C --model "$MODEL" --alias pydoc --parallel 16 --cache 0 --deterministic
U=$URL_C
PROMPTS=("The function returns" "A list is" "To open a file" "The module provides"
  "Exceptions are raised when" "The class" "In Python, a dictionary" "Use the following"
  "The return value" "If the argument is" "This method" "The default value of"
  "A tuple is" "When the loop" "The string" "Each thread")
req() {  # req I STREAM
  jq -nc --arg p "${PROMPTS[$1]}" --argjson s "$2" \
    '{model:"pydoc",prompt:$p,max_tokens:16,temperature:0,ignore_eos:true,stream:$s}'
}
for i in "${!PROMPTS[@]}"; do
  post "$U" /v1/completions "$(req "$i" false)"
  [ "$STATUS" = 200 ] || fail "solo $i: $BODY"
  echo "$BODY" | jq -j '.choices[0].text' >"$WORK/solo.$i"
done
PIDS=()
for i in "${!PROMPTS[@]}"; do
  curl -sN --max-time 120 -d "$(req "$i" true)" "$U/v1/completions" >"$WORK/stream.$i" &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait "$p" || fail "a streaming client failed"; done
for i in "${!PROMPTS[@]}"; do
  [ "$(tail -n 2 "$WORK/stream.$i" | head -n 1)" = "data: [DONE]" ] || fail "stream $i unfinished"
  grep '^data: {' "$WORK/stream.$i" | sed 's/^data: //' | jq -j '.choices[0].text' >"$WORK/together.$i"
  cmp -s "$WORK/solo.$i" "$WORK/together.$i" ||
    fail "prompt $i: together '$(cat "$WORK/together.$i")' != alone '$(cat "$WORK/solo.$i")'"
  TOKENS=$(grep '^data: {' "$WORK/stream.$i" | sed 's/^data: //' | jq -s '.[-1].usage.completion_tokens')
  [ "$TOKENS" = 16 ] || fail "stream $i: $TOKENS tokens"
done
# They really were stepped together: some step held more than 8 sequences.
awk '/^jitllm_batch_size_bucket\{le="8"\}/ { le8 = $2 } /^jitllm_batch_size_count/ { n = $2 }
  END { exit !(n > le8) }' <(curl -s --max-time 10 "$U/metrics") || fail "no step with > 8 sequences"
echo "concurrency: 16 streams equal their solo answers"
