// Instruction-set levels the generated kernels are emitted for, detected with CPUID at run time.
// `JITLLM_ISA` (avx2 | avxvnni | avx512 | amx) forces a narrower level than the CPU's, so every
// path can be tested on one machine; asking for a level the CPU lacks is an error, not a silent
// downgrade. AMX is not an Isa level of its own: it adds tile GEMMs for prompts (jit_amx.h) on top
// of the AVX-512 kernels, which run everything else.
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

// AMX for the prompt GEMMs: CPUID reports AMX-TILE and AMX-INT8, the OS has the tile state
// enabled in XCR0, and Linux grants this process the tile data (arch_prctl
// ARCH_REQ_XCOMP_PERM XTILEDATA, asked on the first call; the grant is per process). False on
// other CPUs and kernels.
bool amx_usable();
// The same request made from the calling thread, once per thread (cached); a pool's workers call
// it before their first tile instruction. True when the thread may run AMX code.
bool amx_thread_ready();
// Whether the default kernels use AMX: JITLLM_ISA=auto with amx_usable(), or JITLLM_ISA=amx
// (which throws when AMX is not usable). Any other JITLLM_ISA value turns it off.
bool selected_amx();

}  // namespace jitllm::jit
