#!/usr/bin/env bash
# End-to-end test of `jitllm info` naming the family and its quirks: the gemma2, olmo2 and
# qwen2moe tiny fixtures as Hugging Face folders (tests/model/data, pydoc-llama's tokenizer from the oracle),
# text and JSON.
set -euo pipefail
JITLLM="$1"
SRC="${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}"
ORACLE="${JITLLM_SHARED:-$SRC/../shared}/oracle"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
folder() {  # folder FAMILY: the fixture as an HF folder in $T/FAMILY
  mkdir -p "$T/$1"
  cp "$SRC/tests/model/data/$1-tiny/config.json" "$SRC/tests/model/data/$1-tiny/model.safetensors" "$T/$1/"
  cp "$ORACLE/pydoc-llama/hf/tokenizer.model" "$ORACLE/pydoc-llama/hf/tokenizer_config.json" "$T/$1/"
}
folder gemma2
folder olmo2
folder qwen2moe
folder olmoe
out="$("$JITLLM" info "$T/gemma2")"
line="$(grep '^family: ' <<< "$out")" || fail "no family line: $out"
for q in "family: gemma2:" "sliding window 24 on 1 of 2 layers" "attention scale 0.125" \
         "attention soft-cap 5" "final logit soft-cap 3" "GELU-tanh gated FFN" "post-attention and post-FFN norms"; do
  grep -qF "$q" <<< "$line" || fail "gemma2: '$q' missing from: $line"
done
json="$("$JITLLM" info --json "$T/olmo2")"
grep -q '"name": "olmo2"' <<< "$json" || fail "olmo2 JSON without its family: $json"
grep -qF 'q/k norms over the whole projection' <<< "$json" || fail "olmo2 JSON without its quirk: $json"
out="$("$JITLLM" info "$T/qwen2moe")"
line="$(grep '^family: ' <<< "$out")" || fail "no family line: $out"
for q in "family: qwen2moe:" "2 of 8 experts a token (width 32), softmax then top-k" \
         "shared expert of width 48"; do
  grep -qF "$q" <<< "$line" || fail "qwen2moe: '$q' missing from: $line"
done
grep -qE '^active parameters: +[0-9.]+ M a token \(2 of 8 experts\)' <<< "$out" ||
  fail "qwen2moe: no active parameters line: $out"
grep -qF 'q/k norms over the whole projection' <<< "$("$JITLLM" info "$T/olmoe")" ||
  fail "olmoe: its q/k norms are over the whole projection"
echo "info_family: ok"
