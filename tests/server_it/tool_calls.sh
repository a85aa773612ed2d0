#!/usr/bin/env bash
# Tool calling end to end on the bundled model, once per tool-call syntax: its own template
# (no tools: the generic convention), and the oracle's Qwen2.5 (Hermes), Llama 3.1, Mistral Nemo
# and Mistral Small 3.2 templates, gpt-oss's (harmony: its markers spelled in text by this
# model), DeepSeek V3.1's and GLM 4.6's (token_model.py); DeepSeek R1's fenced JSON is refused with
# 400.
# tests/server_it/tool_calls.py holds the checks.
# Usage: tool_calls.sh JITLLMD [JITLLM]
source "$(dirname "$0")/lib.bash" "$@"
python3 -c 'import jsonschema' 2>/dev/null || { echo "skipped: python3-jsonschema is not installed"; exit 77; }
T=$SHARED/oracle/templates
start_server G
python3 "$HERE/tool_calls.py" "$URL_G" || fail "generic"
grep -q '"tool calls in the generic syntax"\|tool calls in the generic syntax' "$WORK/G.log" || fail "syntax not logged"
# (Qwen3's template writes Hermes calls too, but thinks: reasoning.sh.)
for t in Qwen-Qwen2.5-7B-Instruct meta-llama-Llama-3.1-8B-Instruct mistralai-Mistral-Nemo-Instruct-2407 \
         Mistral-Small-3.2-24B-Instruct-2506 openai-gpt-oss-120b; do
  start_server "T$RANDOM" --chat-template "$T/$t.jinja"
  url=$(ls -t "$WORK"/T*.port | head -1)
  python3 "$HERE/tool_calls.py" "http://127.0.0.1:$(cat "$url")" || fail "$t"
done
# DeepSeek V3.1 on a copy of the demo whose vocabulary has its markers (token_model.py), biased
# toward them (spelled byte by byte they do not fit the context); asked not to think (its
# template opens a thinking the demo fills until max_tokens).
python3 "$HERE/token_model.py" "${JITLLM_SOURCE_DIR:-$HERE/../..}/models/demo" \
  "$T/deepseek-ai-DeepSeek-V3.1.jinja" "$WORK/deepseek" '<｜end▁of▁sentence｜>' '<｜User｜>' \
  '<｜Assistant｜>' '+<think>' '+</think>' '<｜tool▁calls▁begin｜>' '<｜tool▁calls▁end｜>' \
  '<｜tool▁call▁begin｜>' '<｜tool▁call▁end｜>' '<｜tool▁sep｜>' '<｜tool▁output▁begin｜>' \
  '<｜tool▁output▁end｜>'
XDG_CACHE_HOME=$WORK/cache start_server D -m "$WORK/deepseek"
grep -q "tool calls in the deepseek-v3.1 syntax" "$WORK/D.log" || fail "DeepSeek V3.1 not detected"
python3 "$HERE/tool_calls.py" "$URL_D" --no-thinking \
  --extra '{"logit_bias": {"8185": 10, "8186": 10, "8187": 10, "8188": 10, "8189": 10}}' ||
  fail "DeepSeek V3.1"
# GLM 4.6 the same way (string arguments raw, others JSON).
python3 "$HERE/token_model.py" "${JITLLM_SOURCE_DIR:-$HERE/../..}/models/demo" "$T/GLM-4.6.jinja" \
  "$WORK/glm" '<|user|>' '<|assistant|>' '<|system|>' '<|observation|>' '[gMASK]' '<sop>' \
  '<tool_call>' '</tool_call>' '<arg_key>' '</arg_key>' '<arg_value>' '</arg_value>' '+<think>' \
  '+</think>'
XDG_CACHE_HOME=$WORK/cache start_server L -m "$WORK/glm"
grep -q "tool calls in the glm-xml syntax" "$WORK/L.log" || fail "GLM not detected"
python3 "$HERE/tool_calls.py" "$URL_L" --no-thinking \
  --extra '{"logit_bias": {"8184": 10, "8185": 10, "8186": 10, "8187": 10, "8188": 10, "8189": 10}}' ||
  fail "GLM 4.6"
start_server U --chat-template "$T/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
python3 "$HERE/tool_calls.py" "$URL_U" --unsupported || fail "DeepSeek R1"
echo "tool_calls: ok"
