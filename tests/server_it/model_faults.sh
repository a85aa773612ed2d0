#!/usr/bin/env bash
# Models whose numbers or shapes are wrong do not take jitllmd down (issue 18 items 2 and 3), on
# damaged copies of the pydoc HF fixture (edit_hf.py):
#  - one embedding row of NaN: a request whose prompt holds that token ends with a 500
#    (model_output_invalid; an SSE error event when streamed), and the requests beside and
#    after it are served (/v1/systemone's 500: tests/server/http_server_nan_test.cpp);
#  - vocab_size padded 64 past the SPM model's 2048 pieces (the tokenizer gets [PAD] tokens for
#    them, as llama.cpp's converter writes), the padding's head rows the largest: greedy output
#    runs, and ids past the head are refused in prompts and logit_bias. (A head longer than the
#    tokenizer, masked at sampling: sampler_chain_test.cpp, APaddedHeadPastTheTokenizerIsNeverSampled.)
# Usage: model_faults.sh JITLLMD [JITLLM]
source "$(dirname "$0")/lib.bash" "$@"
export XDG_CACHE_HOME=$WORK/cache  # the edited folders are converted into it
HF=$SHARED/oracle/pydoc-llama/hf
[ -d "$HF" ] || fail "missing fixture $HF"
python3 "$HERE/edit_hf.py" "$HF" "$WORK/nan" nan 100
python3 "$HERE/edit_hf.py" "$HF" "$WORK/padded" pad 64

start_server N --model "$WORK/nan" --alias nan --parallel 2
U=$URL_N
# A healthy request first, one beside the poisoned one, and one after it.
post "$U" /v1/completions '{"prompt": [1, 200, 300], "max_tokens": 40, "ignore_eos": true}'
[ "$STATUS" = 200 ] || fail "clean prompt: $STATUS $BODY"
curl -s -o "$WORK/beside.json" --max-time 60 -d '{"prompt": [1, 200], "max_tokens": 60, "ignore_eos": true}' \
  "$U/v1/completions" &
BESIDE=$!
expect_error "$U" /v1/completions '{"prompt": [1, 100, 5], "max_tokens": 4}' 500 \
  '.code == "model_output_invalid"'
wait "$BESIDE" || fail "the request beside the NaN one failed"
jq -e '.usage.completion_tokens == 60' "$WORK/beside.json" >/dev/null ||
  fail "the request beside the NaN one: $(cat "$WORK/beside.json")"
STREAM=$(curl -s -N --max-time 60 -d '{"prompt": [1, 100], "max_tokens": 4, "stream": true}' "$U/v1/completions")
echo "$STREAM" | grep -q '"model_output_invalid"' || fail "streamed NaN: no error event: $STREAM"
post "$U" /v1/completions '{"prompt": [1, 200, 300], "max_tokens": 4}'
[ "$STATUS" = 200 ] || fail "after the NaN request: $STATUS $BODY"
kill -0 "$PID_N" || fail "the server died"

start_server P --model "$WORK/padded" --alias padded
U=$URL_P
for prompt in '[1, 200, 300]' '[1, 5]' '[1, 1000, 17, 42]'; do
  post "$U" /v1/completions "{\"prompt\": $prompt, \"max_tokens\": 24, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}"
  [ "$STATUS" = 200 ] || fail "padded head, greedy: $STATUS $BODY"
  echo "$BODY" | jq -e '.usage.completion_tokens == 24' >/dev/null || fail "padded head: $BODY"
done
post "$U" /v1/completions '{"prompt": [1, 2050], "max_tokens": 2}'
[ "$STATUS" = 200 ] || fail "a [PAD] token of the padded tokenizer in a prompt: $STATUS $BODY"
expect_error "$U" /v1/completions '{"prompt": [1, 2112], "max_tokens": 2}' 400 '.param == "prompt"'
expect_error "$U" /v1/completions '{"prompt": "x", "logit_bias": {"2112": 5}}' 400 '.param == "logit_bias"'
kill -0 "$PID_P" || fail "the server died"
echo "model_faults: NaN rows end their own requests only; a padded vocabulary serves"
