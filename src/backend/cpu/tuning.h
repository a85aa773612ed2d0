// The CPU backend's settings (core/tuning.h): every JITLLM_* variable src/backend/cpu reads, each
// read once. Their history and the measurements behind the defaults: docs/tuning.md.
#pragma once

#include "core/tuning.h"

namespace jitllm::jit {

struct CpuKnobs {
  tuning::Registry registry{"cpu"};
  tuning::Choice isa{registry, "JITLLM_ISA", "auto", {"auto", "avx2", "avxvnni", "avx512", "amx"},
                     "instruction set of the generated kernels (auto: the best this CPU has; amx: AVX-512 with AMX tiles for prompt GEMMs; avx512: without AMX)"};
  tuning::Choice kernels{registry, "JITLLM_KERNELS", "auto", {"auto", "jit", "jit-avx2", "jit-avxvnni", "jit-avx512", "jit-amx", "reference", "ref"},
                         "CPU kernels of an engine without --kernels (auto: jit when the CPU has AVX2, else reference)"};
  tuning::Flag repack{registry, "JITLLM_REPACK", true,
                      "decode copies of Q8_0/Q4_K/Q6_K weights row-interleaved in huge pages, made at load (0: read the file's layout; with AMX the copy replaces the file's pages, else it doubles them)"};
};
const CpuKnobs& knobs();

}  // namespace jitllm::jit
