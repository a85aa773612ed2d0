// The CPU kernels an Engine runs on, chosen by name (EngineOptions::cpu_kernels, the --kernels
// flag of `jitllm` and -kernels of `jitllmd`, the JITLLM_KERNELS variable). This is the one place
// a name becomes kernels, so front ends pass strings and never include src/backend/.
//   ""                                  $JITLLM_KERNELS if set, else "jit" when the CPU has AVX2,
//                                       else "reference"
//   "jit"                               generated kernels for the best ISA (or $JITLLM_ISA)
//   "jit-avx2", "jit-avxvnni", "jit-avx512"  generated kernels for that ISA level (the names the
//                                       kernels report, e.g. in `jitllm speed`)
//   "jit-amx"                           jit-avx512 with AMX tiles for prompt GEMMs (what "jit"
//                                       is where the CPU and kernel allow AMX)
//   "reference", "ref"                  the portable reference kernels (the tests' oracle)
#pragma once

#include <string>
#include <vector>

namespace jitllm {

class CpuKernels;

// The process-wide kernels `name` selects. Throws jitllm::Error naming the flag (or the
// variable) for an unknown name or an ISA level this CPU cannot run. With batch_invariant
// (jitllmd --deterministic), "" and "jit" give the same ISA's kernels without AMX tiles, and an
// explicit "jit-amx" is refused (CpuKernels::batch_invariant).
const CpuKernels& resolve_cpu_kernels(const std::string& name, bool batch_invariant = false);

// The "jit-<level>" names this CPU runs, lowest level first (`jitllm verify` checks each).
std::vector<std::string> jit_kernel_names();

}  // namespace jitllm
