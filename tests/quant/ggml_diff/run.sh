#!/usr/bin/env bash
# Differential fuzz of src/quant against ggml's own C code (see ggml_diff.cpp). Needs a llama.cpp
# checkout (the oracle used b10472) and a jitllm build dir with jitllm_quant built:
#   tests/quant/ggml_diff/run.sh /path/to/llama.cpp build/<yours>
# ggml-base is compiled like llama.cpp's CMake does (C11 with GNU extensions, -O3, no -march,
# so no fused multiply-add); ggml-cpu with -march=native like a native llama.cpp build.
set -euo pipefail
llama=${1:?usage: run.sh LLAMA_CPP_DIR JITLLM_BUILD_DIR}
build=${2:?usage: run.sh LLAMA_CPP_DIR JITLLM_BUILD_DIR}
src=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g=$llama/ggml
gcc -std=gnu11 -O3 -DNDEBUG -I"$g/include" -I"$g/src" -c "$g/src/ggml-quants.c" -o "$work/base.o"
gcc -std=gnu11 -O3 -DNDEBUG -march=native -I"$g/include" -I"$g/src" -I"$g/src/ggml-cpu" \
  -c "$g/src/ggml-cpu/arch/x86/quants.c" -o "$work/cpu.o"
g++ -std=c++20 -O2 -mf16c -mfma -mavx2 -I"$src/src" "$src/tests/quant/ggml_diff/ggml_diff.cpp" \
  "$work/cpu.o" "$work/base.o" "$build/libjitllm_quant.a" "$build/libjitllm_core.a" -lfmt -lm \
  -o "$work/ggml_diff"
"$work/ggml_diff"
