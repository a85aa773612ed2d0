#!/usr/bin/env bash
# `jitllm info --tuning` end to end: every registry's settings listed with default, current value,
# allowed values and doc (text and JSON), retired variables absent, a set value shown as set, and
# a bad value a one-line error naming the variable (exit 1), both here and when a command reads it.
# Usage: tuning.sh path/to/jitllm
set -euo pipefail
jitllm=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$jitllm" info --tuning > "$tmp/out" || fail "info --tuning exited $?"
for name in JITLLM_CORES JITLLM_PIN JITLLM_LOG JITLLM_NOHUGE JITLLM_ISA JITLLM_KERNELS JITLLM_REPACK; do
  grep -q "^  $name " "$tmp/out" || fail "$name not listed: $(cat "$tmp/out")"
done
grep -q "^core:" "$tmp/out" && grep -q "^cpu:" "$tmp/out" || fail "registry headings missing"
if grep -q "^cuda:" "$tmp/out"; then  # a build with the CUDA backend
  for name in JITLLM_CUDA_GRAPH JITLLM_CUDA_SPLITK JITLLM_CUDA_ATTN_KEYS JITLLM_BATCH_INVARIANT; do
    grep -q "^  $name " "$tmp/out" || fail "$name not listed"
  done
fi
for gone in JITLLM_MV_PF JITLLM_MV_SPLIT JITLLM_CUDA_PERSIST JITLLM_CUDA_Q4K JITLLM_CUDA_DQ_XSTAGE \
            JITLLM_CUDA_DQ_KSTEPS JITLLM_CUDA_ATTN_GQA JITLLM_CUDA_DQ_E4M3; do
  if grep -q "^  $gone " "$tmp/out"; then fail "$gone is still listed"; fi
done
grep -Eq '^  JITLLM_CORES +default 0 +now 0 ' "$tmp/out" || fail "JITLLM_CORES default/now: $(grep CORES "$tmp/out")"

# A set value is shown as set; the JSON has the same settings.
JITLLM_CORES=3 "$jitllm" info --tuning > "$tmp/set"
grep -Eq '^  JITLLM_CORES +default 0 +now 3 \(set\)' "$tmp/set" || fail "set value: $(grep CORES "$tmp/set")"
JITLLM_CORES=3 "$jitllm" info --tuning --json > "$tmp/json"
python3 - "$tmp/json" <<'PY'
import json, sys
knobs = {k["name"]: k for k in json.load(open(sys.argv[1]))}
c = knobs["JITLLM_CORES"]
if (c["registry"], c["default"], c["current"], c["set"]) != ("core", "0", "3", True):
    sys.exit(f"FAIL: JITLLM_CORES in JSON: {c}")
if not all(k["doc"] and k["allowed"] for k in knobs.values()):
    sys.exit("FAIL: a setting without doc or allowed values")
PY

# Bad values: one line naming the variable and what it takes, exit 1.
if JITLLM_CORES=abc JITLLM_ISA=sse2 "$jitllm" info --tuning > "$tmp/bad" 2> "$tmp/err"; then
  fail "bad values accepted"
fi
grep -q "JITLLM_CORES: 'abc' is not an integer in 0..4096" "$tmp/err" || fail "error text: $(cat "$tmp/err")"
grep -q "JITLLM_ISA: 'sse2' is not one of auto, avx2, avxvnni, avx512 or amx" "$tmp/err" || fail "error text: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "more than one line: $(cat "$tmp/err")"
grep -Eq '^  JITLLM_CORES +default 0 +now bad value' "$tmp/bad" || fail "the table does not mark the bad value"

# ... and where a command reads the variable.
"$jitllm" synth "$tmp/tiny.gguf" --shape tiny --type q8_0 > /dev/null
if JITLLM_CORES=-2 "$jitllm" speed -m "$tmp/tiny.gguf" -p 8 -n 2 -r 1 > /dev/null 2> "$tmp/err"; then
  fail "speed ran with JITLLM_CORES=-2"
fi
grep -q "^jitllm: error: JITLLM_CORES: '-2' is not an integer in 0..4096$" "$tmp/err" || fail "speed: $(cat "$tmp/err")"
if JITLLM_REPACK=yes "$jitllm" speed -m "$tmp/tiny.gguf" -p 8 -n 2 -r 1 -t 1 > /dev/null 2> "$tmp/err"; then
  fail "speed ran with JITLLM_REPACK=yes"
fi
grep -q "JITLLM_REPACK: 'yes' is not 0 or 1" "$tmp/err" || fail "speed: $(cat "$tmp/err")"
echo "ok"
