#!/usr/bin/env bash
# Tool calling end to end on the bundled model, once per tool-call syntax: its own template
# (no tools: the generic convention), and the oracle's Qwen2.5 (Hermes), Llama 3.1, Mistral Nemo
# and Mistral Small 3.2 templates, gpt-oss's (harmony: its markers spelled in text by this
# model); GLM 4.6's syntax is refused with 400.
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
start_server U --chat-template "$T/GLM-4.6.jinja"
python3 "$HERE/tool_calls.py" "$URL_U" --unsupported || fail "GLM 4.6"
echo "tool_calls: ok"
