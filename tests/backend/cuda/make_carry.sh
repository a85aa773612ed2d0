#!/usr/bin/env bash
# Packs what one device-tool call needs into build/cuda-carry (ignored by git; carry it with
# `carry: ["build/cuda-carry"]`): the stripped, gzipped jitllm and GPU test binaries from
# build/cuda, the shared libraries the GPU machine's image lacks (ICU 72, sentencepiece, liburing,
# cpp-httplib, brotli; everything xz-compressed), and the oracle subset the GPU tests read (the
# ../shared folder does not travel). BASE_BIN=path/to/jitllm adds an earlier build's jitllm as
# jitllm-base (device_run.sh samelogits).
set -euo pipefail
cd "$(dirname "$0")/../../.."
B=${B:-build/cuda}
C=${C:-build/cuda-carry}
S=${JITLLM_SHARED:-../shared}
rm -rf $C && mkdir -p $C/bin $C/lib $C/shared/oracle/models $C/shared/oracle/logits
for b in ${BINS:-$B/jitllm $B/tests/test_backend_cuda $B/tests/test_backend_cuda_nogpu}; do
  strip -o $C/bin/$(basename $b) $b && xz -9 $C/bin/$(basename $b)
done
if [ -n "${BASE_SERVE_BIN:-}" ]; then  # an earlier build's jitllmd (device_run.sh coldstart)
  strip -o $C/bin/jitllmd-base "$BASE_SERVE_BIN" && xz -9 $C/bin/jitllmd-base
fi
if [ -n "${BASE_BIN:-}" ]; then  # an earlier build's jitllm for device_run.sh samelogits
  strip -o $C/bin/jitllm-base "$BASE_BIN" && xz -9 $C/bin/jitllm-base
fi
for lib in $(ldd ${BINS:-$B/jitllm $B/tests/test_backend_cuda} | awk '/=>/ {print $3}' | sort -u |
             grep -E 'libicu|libsentencepiece|libcpp-httplib|libbrotli|liburing'); do
  xz -9 -c "$lib" > $C/lib/$(basename "$lib").xz
done
for f in ${FIXTURES:-F32 BF16 F16 Q8_0 Q6_K Q4_K_M Q4_0 Q4_1 Q5_0 Q5_1 Q5_K_M IQ4_NL Q3_K_M Q2_K MXFP4} ${EXTRA_FIXTURES:-}; do
  cp $S/oracle/models/synth-llama.$f.gguf $C/shared/oracle/models/
  cp $S/oracle/logits/synth-llama.$f.* $C/shared/oracle/logits/
done
mkdir -p $C/shared/oracle/pydoc-llama  # a trained 6-layer model (jitllm verify --devices)
# PYDOC=0 leaves it out (a call whose working tree and carry would pass the 64 MiB limit).
[ "${PYDOC:-1}" = 0 ] || cp $S/oracle/pydoc-llama/pydoc-llama.Q8_0.gguf $C/shared/oracle/pydoc-llama/
mkdir -p $C/shared/oracle/pydoc-llama/hf  # its tokenizer, borrowed by the qwen3-tiny HF folder
cp $S/oracle/pydoc-llama/hf/tokenizer.model $S/oracle/pydoc-llama/hf/tokenizer_config.json $C/shared/oracle/pydoc-llama/hf/
du -sh $C
