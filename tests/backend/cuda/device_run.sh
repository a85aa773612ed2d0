#!/usr/bin/env bash
# One call on the GPU machine (device tool): GPU tests, the process-level cubin-cache check and
# decode/prefill speed on synthetic Llama-3.2-1B and 3.1-8B Q4_K_M. Expects the carry folder made
# by tests/backend/cuda/make_carry.sh at build/cuda-carry (binaries + the oracle subset).
# Usage: bash tests/backend/cuda/device_run.sh [stage...]   stages: tests cache speed (default all)
set -u -o pipefail
C=${C:-build/cuda-carry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin /tmp/lib
for f in $C/bin/*.xz; do xz -dc "$f" > /tmp/bin/$(basename "$f" .xz); chmod +x /tmp/bin/$(basename "$f" .xz); done
for f in $C/lib/*.xz; do xz -dc "$f" > /tmp/lib/$(basename "$f" .xz); done
export LD_LIBRARY_PATH=/tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export JITLLM_SHARED=$PWD/$C/shared
export XDG_CACHE_HOME=/tmp/xdg
stages=${*:-tests cache speed}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee $OUT/gpu.txt
ldd /tmp/bin/jitllm /tmp/bin/test_backend_cuda | grep -E "not found|fmt|pcre|icu|sentencepiece|httplib" | tee -a $OUT/gpu.txt
for s in $stages; do
  case $s in
    tests)
      /tmp/bin/test_backend_cuda_nogpu 2>&1 | tail -n 5 | tee $OUT/nogpu.log
      timeout 300 /tmp/bin/test_backend_cuda ${GTEST_ARGS:-} 2>&1 | tee $OUT/gpu_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|error|Expected|Which is|actual|rel err" | head -n 150
      ;;
    cache)
      M=$C/shared/oracle/models/synth-llama.Q4_K_M.gguf
      rm -rf /tmp/xdg-cache
      for i in 1 2; do
        XDG_CACHE_HOME=/tmp/xdg-cache JITLLM_CUDA_STATS=1 /tmp/bin/jitllm run -m $M --ids -p "1 5 9" -n 8 --temp 0 --devices cuda 2>&1 | tail -n 3 | tee -a $OUT/cache.log
      done
      ;;
    speed)
      for shape in llama-3.2-1b llama-3.1-8b; do
        /usr/bin/time -f "synth %e s" /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 2
        JITLLM_CUDA_STATS=1 /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p ${PP:-512} -n 128 -r 3 --devices cuda --ttft 2>&1 | tee -a $OUT/speed.log
      done
      ;;
  esac
done
