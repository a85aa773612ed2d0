#!/usr/bin/env bash
# End to end: `jitllm convert` + `jitllm info` on the oracle files. The .jlm made from pydoc-llama's
# HF folder describes itself like llama.cpp's GGUF of the same model (hyperparameters, tensor
# count and bytes, tokenizer); --verify passes, then fails after one data byte is flipped; a
# truncated file and an unknown --type are refused with a clear one-line error and no output.
# Usage: convert_info.sh path/to/jitllm
set -euo pipefail
jitllm=$1
src=${JITLLM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
oracle=${JITLLM_SHARED:-$src/../shared}/oracle
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. HF folder -> .jlm (keep = F32, like llama.cpp's --outtype f32 GGUF).
"$jitllm" convert "$oracle/pydoc-llama/hf" "$tmp/pydoc.jlm" > "$tmp/convert.out"
grep -q "57 tensors" "$tmp/convert.out" || fail "convert summary: $(cat "$tmp/convert.out")"
! compgen -G "$tmp/pydoc.jlm.tmp*" > /dev/null || fail "temporary file left behind"

"$jitllm" info --json "$oracle/pydoc-llama/pydoc-llama.F32.gguf" > "$tmp/gguf.json"
"$jitllm" info --json --verify "$tmp/pydoc.jlm" > "$tmp/jlm.json"
python3 - "$tmp/gguf.json" "$tmp/jlm.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1])); j = json.load(open(sys.argv[2]))
def check(what, a, b):
    if a != b: sys.exit(f"FAIL: {what}: gguf {a!r} vs jlm {b!r}")
check("architecture", g["architecture"], j["architecture"])
check("hyperparameters", g["hyperparameters"], j["hyperparameters"])
for k in ("tensor_count", "parameters", "tensor_bytes", "decode_bytes_per_token", "by_format", "tokenizer"):
    check(k, g[k], j[k])
check("format", j["format"], "jlm")
check("container version", j["container"]["version"], 1)
check("groups", j["container"]["groups_by_kind"], {"block": 6, "embedding": 1, "head": 1})
check("verify", (j["verify"]["checked"], j["verify"]["failures"]), (True, []))
# decode bytes/token = all weights but the embedding table, plus one embedding row (F32: 192 x 4).
check("decode bytes", j["decode_bytes_per_token"], j["tensor_bytes"] - 192 * 2048 * 4 + 192 * 4)
PY

# 2. Text output names the essentials.
"$jitllm" info "$tmp/pydoc.jlm" > "$tmp/info.txt"
for want in "architecture:.*llama" "llama.block_count *6" "decode bytes/token" "tokenizer:.*llama, 2048 tokens" \
            "container:.*jlm version 1, 8 page groups"; do
  grep -q "$want" "$tmp/info.txt" || fail "info text lacks '$want': $(cat "$tmp/info.txt")"
done

# 3. GGUF -> .jlm requantized to q8_0: info shows the formats.
"$jitllm" convert --quiet --type q8_0 "$oracle/models/synth-llama.F32.gguf" "$tmp/q8.jlm"
"$jitllm" info --json "$tmp/q8.jlm" | python3 -c '
import json, sys
j = json.load(sys.stdin)
f = {x["format"]: x["tensors"] for x in j["by_format"]}
if f != {"q8_0": 16, "f32": 5}: sys.exit(f"FAIL: q8_0 formats {f}")'

# 4. A flipped data byte is found by --verify (exit 1, names the tensor).
cp "$tmp/q8.jlm" "$tmp/bad.jlm"
size=$(stat -c %s "$tmp/bad.jlm")
printf '\x5a' | dd of="$tmp/bad.jlm" bs=1 seek=$((size - 8192 + 100)) conv=notrunc status=none
if "$jitllm" info --verify "$tmp/bad.jlm" > "$tmp/verify.txt" 2>&1; then fail "verify passed a damaged file"; fi
grep -q "verify: FAILED output.weight" "$tmp/verify.txt" || fail "verify output: $(cat "$tmp/verify.txt")"

# 5. Truncated: refused at open with one clear line.
head -c $((size / 2)) "$tmp/q8.jlm" > "$tmp/cut.jlm"
if "$jitllm" info "$tmp/cut.jlm" 2> "$tmp/cut.err"; then fail "truncated file accepted"; fi
grep -q "truncated" "$tmp/cut.err" || fail "truncation message: $(cat "$tmp/cut.err")"
[ "$(wc -l < "$tmp/cut.err")" -eq 1 ] || fail "more than one error line"

# 6. Bad --type: error, nothing written.
if "$jitllm" convert --type q9 "$oracle/models/synth-llama.F32.gguf" "$tmp/x.jlm" 2> "$tmp/type.err"; then
  fail "bad --type accepted"
fi
grep -q -- "--type q9" "$tmp/type.err" || fail "type message: $(cat "$tmp/type.err")"
[ ! -e "$tmp/x.jlm" ] && ! compgen -G "$tmp/x.jlm.tmp*" > /dev/null || fail "output left after a failed convert"

# 7. A preset: llama-quantize's mix, and a summary line per format that says why.
"$jitllm" convert --type Q4_K_M "$oracle/models/synth-llama.F32.gguf" "$tmp/q4km.jlm" > "$tmp/q4km.out"
grep -q "^  q6_K  *3 tensors .*output head in the Q4_K_M mix (1)" "$tmp/q4km.out" ||
  fail "Q4_K_M summary: $(cat "$tmp/q4km.out")"
grep -q "^  f32  *5 tensors .*not quantized: norm (5)" "$tmp/q4km.out" || fail "norms: $(cat "$tmp/q4km.out")"
# 8. An output not named .jlm is refused before anything is written.
if "$jitllm" convert "$oracle/models/synth-llama.F32.gguf" "$tmp/x.gguf" 2> "$tmp/ext.err"; then
  fail "a .gguf output name was accepted"
fi
grep -q "name the output \*.jlm" "$tmp/ext.err" || fail "extension message: $(cat "$tmp/ext.err")"
[ ! -e "$tmp/x.gguf" ] || fail "x.gguf written"

# Two converts to one output at once: both succeed and the file they leave is whole.
"$jitllm" convert --quiet --type q8_0 "$oracle/models/synth-llama.F32.gguf" "$tmp/both.jlm" & a=$!
"$jitllm" convert --quiet "$oracle/models/synth-llama.F32.gguf" "$tmp/both.jlm" & b=$!
wait $a || fail "the first of two concurrent converts failed"
wait $b || fail "the second of two concurrent converts failed"
"$jitllm" info --verify "$tmp/both.jlm" > /dev/null || fail "two concurrent converts left a broken file"
! compgen -G "$tmp/both.jlm.tmp*" > /dev/null || fail "temporary file left behind by concurrent converts"
echo "convert_info: ok"
