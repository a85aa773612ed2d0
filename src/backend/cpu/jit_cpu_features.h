// Instruction-set levels the generated kernels are emitted for, detected with CPUID at run time.
// `JITLLM_ISA` (avx2 | avxvnni | avx512) forces a narrower level than the CPU's, so every path can
// be tested on one machine; asking for a level the CPU lacks is an error, not a silent downgrade.
#pragma once

namespace jitllm::jit {

enum class Isa {
  Avx2,        // AVX2 + FMA + F16C; u8 x s8 dots with vpmaddubsw + vpmaddwd
  AvxVnni,     // as Avx2 with VEX vpdpbusd (AVX-VNNI)
  Avx512Vnni,  // AVX-512 F/BW/VL + VNNI (EVEX vpdpbusd, 32 vector registers)
};

const char* isa_name(Isa isa);

// The best level this CPU supports (cached after the first call).
Isa cpu_best_isa();
// Whether the CPU can run kernels emitted for `isa`.
bool cpu_supports(Isa isa);
// cpu_best_isa(), or JITLLM_ISA when set (throws for an unknown name or an unsupported level);
// null-free: the generated kernels need at least AVX2, so this throws on CPUs without it.
Isa selected_isa();

}  // namespace jitllm::jit
