#!/usr/bin/env bash
# End-to-end test of `jitllm tokenize` against the oracle: llama.cpp's prompt ids of the synth
# fixture, HF/llama.cpp vectors of the vocab GGUFs (read from -f files, --no-bos), pydoc-llama's
# HF folder, --pieces and errors.
set -euo pipefail
JITLLM="$1"
ORACLE="${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}/../shared}/oracle"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# JSON array "key": [1, 2, 3] (possibly over several lines) -> "1 2 3".
json_ids() { tr -d ' \n' < "$1" | grep -o "\"$2\":\[[^]]*\]" | head -1 | sed 's/.*\[//; s/\]//; s/,/ /g'; }

# 1. BOS + "The quick brown fox" with the synth fixture (llama.cpp's prompt ids).
want="$(json_ids "$ORACLE/logits/synth-llama.F32.fox.json" prompt_ids)"
got="$("$JITLLM" tokenize -m "$ORACLE/models/synth-llama.F32.gguf" -p "The quick brown fox")"
[ "$got" = "$want" ] || fail "synth fox: got '$got', want '$want'"

# 2. Vector files: test i of the .inp is line i+1 of the .out (no BOS).
split_test() {  # $1 = .inp, $2 = index -> file $TMP/t
  awk -v RS='\n__ggml_vocab_test__\n' -v want="$2" 'NR == want + 1 { printf "%s", $0; exit }' "$1" > "$TMP/t"
}
for vocab in llama-spm gpt-2 bert-bge deepseek-llm; do
  for i in 11 28 32 45; do
    split_test "$ORACLE/tokenizer/ggml-vocab-$vocab.gguf.inp" "$i"
    want="$(sed -n "$((i + 1))p" "$ORACLE/tokenizer/ggml-vocab-$vocab.gguf.out" | xargs)"
    got="$("$JITLLM" tokenize -m "$ORACLE/tokenizer/ggml-vocab-$vocab.gguf" -f "$TMP/t" --no-bos)"
    [ "$got" = "$want" ] || fail "$vocab test $i: got '$got', want '$want'"
  done
done

# 3. The HF folder of pydoc-llama (tokenizer.model) gives llama.cpp's prompt ids.
want="$(json_ids "$ORACLE/pydoc-llama/llamacpp/F32.thread.json" prompt_ids)"
prompt="$(tr -d '\n' < "$ORACLE/pydoc-llama/llamacpp/F32.thread.json" | grep -o '"prompt": *"[^"]*"' | sed 's/.*: *"//; s/"$//')"
got="$("$JITLLM" tokenize -m "$ORACLE/pydoc-llama/hf" -p "$prompt")"
[ "$got" = "$want" ] || fail "pydoc hf '$prompt': got '$got', want '$want'"

# 3b. The same model as a .jlm container (written by `jitllm convert`) keeps its tokenizer.
"$JITLLM" convert -q "$ORACLE/pydoc-llama/pydoc-llama.F32.gguf" "$TMP/pydoc.jlm"
got="$("$JITLLM" tokenize -m "$TMP/pydoc.jlm" -p "$prompt")"
[ "$got" = "$want" ] || fail "pydoc .jlm '$prompt': got '$got', want '$want'"

# 4. --pieces: one line per token, the BOS shown as its text.
"$JITLLM" tokenize -m "$ORACLE/pydoc-llama/hf" -p "$prompt" --pieces > "$TMP/pieces"
[ "$(wc -l < "$TMP/pieces")" -eq "$(echo "$want" | wc -w)" ] || fail "--pieces line count"
grep -q "^ *1 -> '<s>'$" "$TMP/pieces" || fail "--pieces BOS line"

# 5. --parse-special turns "<s>" into id 1; without it, it is text.
got="$("$JITLLM" tokenize -m "$ORACLE/tokenizer/ggml-vocab-llama-spm.gguf" -p "<s>" --parse-special --no-bos)"
[ "$got" = "1" ] || fail "--parse-special: got '$got'"
got="$("$JITLLM" tokenize -m "$ORACLE/tokenizer/ggml-vocab-llama-spm.gguf" -p "<s>" --no-bos)"
[ "$got" != "1" ] || fail "without --parse-special '<s>' must not be id 1"

# 6. Errors: one line, non-zero exit.
if "$JITLLM" tokenize -m "$TMP/missing.gguf" -p x 2> "$TMP/err"; then fail "missing model accepted"; fi
grep -q "missing.gguf" "$TMP/err" || fail "error does not name the file: $(cat "$TMP/err")"
printf 'GGUF\x03\x00\x00\x00garbage' > "$TMP/bad.gguf"
if "$JITLLM" tokenize -m "$TMP/bad.gguf" -p x 2> "$TMP/err"; then fail "corrupt model accepted"; fi
grep -q "bad.gguf" "$TMP/err" || fail "error does not name the file: $(cat "$TMP/err")"
echo "tokenize.sh: all checks passed"
