#!/usr/bin/env bash
# End-to-end test of `jitllm chat-template` against the oracle's jinja2 renders
# (shared/oracle/templates/expected): template files with --bos/--eos/--now/--vars, the JSON
# object form of --messages, Gemma 2's system-role fallback (llama.cpp's merge) and --strict,
# --no-generation-prompt, a GGUF's own template and vocabulary, and errors.
set -euo pipefail
JITLLM="$1"
ORACLE="${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}/../shared}/oracle"
T="$ORACLE/templates"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
NOW=1768478400  # 2026-01-15 12:00:00 UTC, the oracle's clock

# render EXPECTED_JSON [extra args...]: renders the case's template with its messages and globals.
render() {
  local case="$1"; shift
  jq '.messages' "$case" > "$TMP/messages.json"
  "$JITLLM" chat-template "$T/$(jq -r .template "$case")" --messages "$TMP/messages.json" \
    --bos "$(jq -r .globals.bos_token "$case")" --eos "$(jq -r .globals.eos_token "$case")" --now "$NOW" \
    --vars "$(jq -c '.globals | {enable_thinking, date_string, datetime}' "$case")" "$@"
}

# 1. Byte-exact renders (compared as files: trailing newlines matter).
for name in meta-llama-Llama-3.1-8B-Instruct.system_user Qwen3.5-4B.system_user_assistant_user \
            openai-gpt-oss-120b.user_assistant_user google-gemma-4-31B-it.system_user_assistant_user \
            deepseek-ai-DeepSeek-V3.1.system_user_assistant_user; do
  case="$T/expected/$name.json"
  render "$case" > "$TMP/got"
  jq -j .expected "$case" > "$TMP/want"
  cmp -s "$TMP/got" "$TMP/want" || fail "$name: render differs from jinja2 ($(diff "$TMP/got" "$TMP/want" | head -5))"
done

# 2. The object form of --messages: other keys become template variables.
case="$T/expected/Qwen-Qwen3-0.6B.system_user.json"
jq '{messages: .messages, enable_thinking: true}' "$case" > "$TMP/object.json"
"$JITLLM" chat-template "$T/Qwen-Qwen3-0.6B.jinja" --messages "$TMP/object.json" --eos '<|im_end|>' > "$TMP/got"
jq -j .expected "$case" > "$TMP/want"
cmp -s "$TMP/got" "$TMP/want" || fail "object form of --messages"

# 3. --no-generation-prompt: the same prompt without the assistant header.
"$JITLLM" chat-template "$T/Qwen-Qwen3-0.6B.jinja" --messages "$TMP/object.json" --no-generation-prompt > "$TMP/nogen"
[ "$(wc -c < "$TMP/nogen")" -lt "$(wc -c < "$TMP/want")" ] || fail "--no-generation-prompt is not shorter"
cmp -s "$TMP/nogen" <(head -c "$(wc -c < "$TMP/nogen")" "$TMP/want") || fail "--no-generation-prompt is not a prefix"

# 4. Gemma 2 rejects the system role: merged like llama.cpp (note on stderr), or an error with --strict.
case="$T/expected/google-gemma-2-2b-it.system_user.json"
render "$case" > "$TMP/got" 2> "$TMP/err"
jq -j .expected_after_system_merge "$case" > "$TMP/want"
cmp -s "$TMP/got" "$TMP/want" || fail "gemma-2 system merge"
grep -q "System role not supported" "$TMP/err" || fail "gemma-2: no note on stderr"
if render "$case" --strict > /dev/null 2> "$TMP/err"; then fail "--strict accepted a rejected system role"; fi
grep -q "System role not supported" "$TMP/err" || fail "--strict error: $(cat "$TMP/err")"

# 5. A GGUF's own template, with bos from its vocabulary (phi-3's template drops system messages).
jq '.messages' "$T/expected/microsoft-Phi-3.5-mini-instruct.system_user.json" > "$TMP/messages.json"
"$JITLLM" chat-template "$ORACLE/tokenizer/ggml-vocab-phi-3.gguf" --messages "$TMP/messages.json" > "$TMP/got"
printf '<s><|user|>\nHello! What is 2+2?<|end|>\n<|assistant|>\n' > "$TMP/want"
cmp -s "$TMP/got" "$TMP/want" || fail "phi-3 gguf: $(od -c "$TMP/got" | head -3)"

# 6. Errors: one line naming the file and position, non-zero exit.
printf 'ok\n{%% if x %%}\n{{ 1 + }}\n' > "$TMP/bad.jinja"
if "$JITLLM" chat-template "$TMP/bad.jinja" --messages "$TMP/messages.json" 2> "$TMP/err"; then fail "bad template accepted"; fi
grep -q "bad.jinja: template:3:8: expected an expression" "$TMP/err" || fail "syntax error message: $(cat "$TMP/err")"
if "$JITLLM" chat-template "$ORACLE/models/synth-llama.F32.gguf" --messages "$TMP/messages.json" 2> "$TMP/err"; then
  fail "model without a template accepted"
fi
grep -q "tokenizer.chat_template" "$TMP/err" || fail "missing template message: $(cat "$TMP/err")"
echo '{"role": "user"' > "$TMP/broken.json"
if "$JITLLM" chat-template "$T/Qwen-Qwen3-0.6B.jinja" --messages "$TMP/broken.json" 2> "$TMP/err"; then fail "broken JSON accepted"; fi
grep -q "broken.json: invalid JSON" "$TMP/err" || fail "JSON error message: $(cat "$TMP/err")"
echo "chat_template.sh: all checks passed"
