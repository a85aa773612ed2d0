#!/usr/bin/env bash
# jitllm synth + speed + verify end to end on the tiny shape: the synthetic GGUF is deterministic
# (same seed, same bytes), bad shape/mix names are clear errors, speed prints the pp/tg lines the
# A/B harness parses, and verify finds every kernel path in greedy agreement with the reference
# on the oracle fixtures.
set -euo pipefail
JITLLM="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$JITLLM" synth "$dir/a.gguf" --shape tiny --type q4_k_m --seed 7 > /dev/null
"$JITLLM" synth "$dir/b.gguf" --shape tiny --type q4_k_m --seed 7 > /dev/null
"$JITLLM" synth "$dir/c.gguf" --shape tiny --type q4_k_m --seed 8 > /dev/null
cmp "$dir/a.gguf" "$dir/b.gguf" || { echo "synth is not deterministic"; exit 1; }
if cmp -s "$dir/a.gguf" "$dir/c.gguf"; then echo "the seed does not change the weights"; exit 1; fi

if "$JITLLM" synth "$dir/x.gguf" --shape nope --type q8_0 2> "$dir/err"; then exit 1; fi
grep -q "unknown (known: tiny" "$dir/err" || { cat "$dir/err"; exit 1; }
if "$JITLLM" synth "$dir/x.gguf" --shape tiny --type q9 2> "$dir/err"; then exit 1; fi
grep -q "unknown mix" "$dir/err" || { cat "$dir/err"; exit 1; }

for mix in q8_0 q4_0 q6_k; do
  "$JITLLM" synth "$dir/$mix.gguf" --shape tiny --type $mix > /dev/null
done

out=$("$JITLLM" speed -m "$dir/a.gguf" -p 32 -n 8 -r 2 -t 2)
echo "$out"
echo "$out" | grep -Eq '^pp32: [0-9.]+ tok/s' || { echo "no pp line"; exit 1; }
echo "$out" | grep -Eq '^tg8: [0-9.]+ tok/s' || { echo "no tg line"; exit 1; }
echo "$out" | grep -q 'read wall' || { echo "no bandwidth line"; exit 1; }

# verify on llama-quantize's fixtures (random-weight synth files have near-ties where a 1e-6
# difference in a sum can move an activation rounding and flip a greedy pick).
shared="${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}/../shared}"
for f in Q8_0 Q4_K_M Q4_0 Q6_K; do
  "$JITLLM" verify "$shared/oracle/models/synth-llama.$f.gguf" -n 8
done
