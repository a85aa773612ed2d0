// Q6_K weight levels on ymm, shared by the prefill GEMM emitter (jit_matmul_emit.cpp) and the
// decode matvec emitter (jit_matvec_emit.cpp), which unpack a super-block the same way.
#pragma once

#include <xbyak/xbyak.h>

namespace jitllm::jit {

// Step j (0..3) of one 128-value half of a Q6_K super-block: q = the 32 six-bit levels (0..63)
// of groups 8h+2j (lanes 0-15) and 8h+2j+1 (lanes 16-31). ql0/ql1 hold the half's 64 low-nibble
// bytes, qh its 32 high-bit bytes; c0F / c30 label 32-byte constants of 0x0F / 0x30. tt is
// scratch. Level = low nibble (j < 2: low nibbles, else high) | two bits of qh at bits 4-5.
inline void emit_q6k_levels(Xbyak::CodeGenerator& g, const Xbyak::Ymm& q, const Xbyak::Ymm& tt,
                            const Xbyak::Ymm& ql0, const Xbyak::Ymm& ql1, const Xbyak::Ymm& qh,
                            int j, const Xbyak::Label& c0F, const Xbyak::Label& c30) {
  const Xbyak::Ymm& ql = (j & 1) ? ql1 : ql0;
  if (j < 2) {
    g.vpand(q, ql, g.ptr[g.rip + c0F]);
  } else {
    g.vpsrlw(q, ql, 4);
    g.vpand(q, q, g.ptr[g.rip + c0F]);
  }
  switch (j) {
    case 0: g.vpsllw(tt, qh, 4); break;
    case 1: g.vpsllw(tt, qh, 2); break;
    case 2: g.vmovdqa(tt, qh); break;
    default: g.vpsrlw(tt, qh, 2); break;
  }
  g.vpand(tt, tt, g.ptr[g.rip + c30]);
  g.vpor(q, q, tt);
}

}  // namespace jitllm::jit
