// Internal to the generated matmul emitter: the Emitter class (registers, stack frame, small
// helpers, the per-format units it is built from). Its definitions are split by width:
// jit_matmul_emit.cpp (kernel structure, the ymm units, constants, tile shapes) and
// jit_matmul_emit_zmm.cpp (the AVX-512 zmm K units and the Q8_0 token-pair GEMM).
#pragma once

#include <xbyak/xbyak.h>

#include <cstring>
#include <vector>

#include "backend/cpu/jit_matmul.h"
#include "core/error.h"

namespace jitllm::jit::emit_detail {

using namespace Xbyak;

// Stack frame (64-byte aligned): [0, 512) per-row unpacked scales of the ymm Q4_K unit (64 bytes
// x up to 8 rows); [512, 1024) the zmm K units' per-row scale products d_w * d_a of the current
// super-block, one float per token (row r: 512 + 128 r, and + 64 for dmin_w * d_a); from 1024 the
// tile's activation scales transposed, 16 floats per super-block (token t in lane t), built once
// per call so the products are one vmulps per row and super-block instead of one per token.
constexpr int kStackBytes = 512;
constexpr int kProdOff = 512, kDaTOff = 1024;
constexpr int kMinsOff = 0, kMaccOff = 256;  // Q4_K GEMM (zmm only): row r's min pairs at 16 r,
                                             // its mins accumulator spilled at 256 + 64 r

class Emitter : public CodeGenerator {
 public:
  explicit Emitter(const MatKey& key)
      : CodeGenerator(4096, AutoGrow), key_(key), al_(act_layout(key.type, key.k)) {
    if (key.rows < 1 || key.rows > 4 || key.tokens < 1 || key.tokens > 8)
      throw_error("jit matmul: tile {}x{} out of range", key.rows, key.tokens);
    emit();
    ready();
  }

 private:
  // ---------------------------------------------------------------- registers
  const Reg64 wrow = rsi, stride = rdx, stride3 = rcx, nrows = r8, act = r9, out = r10,
              ostride = r11, wp = rax, ap = rbx, dp = rbp, s32p = r12, s16p = r13, cnt = r14,
              tmp = r15;

  struct Pool {
    uint32_t used = 0;
    int size = 16;
    Ymm take() {
      for (int i = 0; i < size; ++i)
        if (!(used & (1u << i))) {
          used |= 1u << i;
          return Ymm(i);
        }
      throw_error("jit matmul: tile needs more than {} vector registers", size);
    }
    void give(const Ymm& y) { used &= ~(1u << y.getIdx()); }
  };

  MatKey key_;
  ActLayout al_;
  std::vector<Zmm> macc_;  // Q4_K GEMM: per-row mins accumulators (see body)
  Label c0F_, c30_, c80_, lo16_, ones16_, ctrlX_, ctrlY_, maskA_, maskN_, q6ctrl_, k4idx_, k6idx_;

  bool vnni() const { return key_.isa != Isa::Avx2; }
  // zmm K units (AVX-512, jit_matmul_emit_zmm.cpp). Q8_0 on AVX-512 runs the ymm unit for
  // decode (ggml's lane order) and body_q8_0_pairs for the GEMM tiles.
  bool wide() const {
    return key_.isa == Isa::Avx512Vnni &&
           (key_.type == QuantType::Q4_K || key_.type == QuantType::Q6_K);
  }
  int P() const { return int(al_.bytes); }

  Address W(int r, int disp) {
    switch (r) {
      case 0: return ptr[wp + disp];
      case 1: return ptr[wp + stride + disp];
      case 2: return ptr[wp + stride * 2 + disp];
      default: return ptr[wp + stride3 + disp];
    }
  }
  Address A(int t, int disp) { return ptr[ap + t * P() + disp]; }

  // acc += u8(u) . s8(s) summed over 4-byte groups (8 int32 lanes).
  void dot(const Ymm& acc, const Ymm& u, const Operand& s, Pool& pool) {
    if (key_.isa == Isa::Avx512Vnni) {
      vpdpbusd(acc, u, s, EvexEncoding);
    } else if (key_.isa == Isa::AvxVnni) {
      vpdpbusd(acc, u, s, VexEncoding);
    } else {
      // Pair sums stay within int16: u <= 128 (|w| of Q8_0) or <= 63 (4/6-bit levels), |s| <= 127.
      const Ymm t = pool.take();
      vpmaddubsw(t, u, s);
      vpmaddwd(t, t, ptr[rip + ones16_]);
      vpaddd(acc, acc, t);
      pool.give(t);
    }
  }

  // fp16 at `a` broadcast to 8 floats.
  void load_half(const Ymm& y, const Address& a) {
    vpbroadcastw(Xmm(y.getIdx()), a);
    vcvtph2ps(y, Xmm(y.getIdx()));
  }

  // ---------------------------------------------------------------- formats
  void unit_q8_0(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool);

  void unit_q4_0(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool);

  void unit_q4_k(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool);

  void unit_q6_k(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool);

  // ---------------------------------------------------------------- zmm (AVX-512) units

  void unit_q4_k_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool);

  void unit_q6_k_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool);

  // ---------------------------------------------------------------- Q8_0 GEMM, token pairs
  // AVX-512 prefill Q8_0 with ggml's exact float order: a zmm holds two tokens of one block
  // (lanes 0-7: token t, 8-15: token t+1), so each 8-lane half is exactly the ymm unit's
  // accumulator (per lane: acc = fma(float(isum), d_w * d_a, acc), blocks in order) and halves
  // are reduced separately. The signed x signed dot runs as (w + 128) . a - 128 * sum4(a): the
  // correction is computed once per token pair and block and shared by the R rows, the weight
  // block is broadcast to both halves once and shared by the T tokens. Integer lanes are exact,
  // so the result is bit-identical to the sign-trick ymm unit.
  void body_q8_0_pairs(int R);

  // ---------------------------------------------------------------- structure
  struct Geometry {
    int block_bytes, unit_elems, d_step, s32_step, s16_step;
  };
  Geometry geometry() const;

  void hsum_store(const Ymm& y, const Address& dst, Pool& pool, const Address* minus = nullptr);

  // zmm K-format GEMM tiles read the activation scales from the transposed copy on the stack
  // (tmp walks it, one 64-byte row per super-block).
  bool transposed_da() const {
    return wide() && key_.tokens > 1 &&
           (key_.type == QuantType::Q4_K || key_.type == QuantType::Q6_K);
  }
  // Per super-block record from kDaTOff: 16 activation scales; Q4_K adds the 32-sums as int16
  // pairs transposed: 4 rows (group pairs j) of 16 dwords (token t in lane t).
  int da_rec() const { return key_.type == QuantType::Q4_K ? 320 : 64; }
  int stack_bytes() const {
    return transposed_da() ? kDaTOff + da_rec() * int(key_.k / 256) : kStackBytes;
  }

  bool q8_0_pairs() const {
    // The GEMM tiles (4 rows; T = 1 is the tail of a token count 8n + 1); the decode tile
    // (2 x 1) keeps the ymm unit.
    return key_.type == QuantType::Q8_0 && key_.isa == Isa::Avx512Vnni &&
           (key_.tokens > 1 || key_.rows > 2);
  }

  void body(int R);

  void advance_rows(int R);

  void emit();

  void bytes(Label& l, const uint8_t* b, int n) {
    align(32);
    L(l);
    for (int i = 0; i < n; ++i) db(b[i]);
  }
  void splat(Label& l, uint8_t v) {
    uint8_t b[32];
    std::memset(b, v, 32);
    bytes(l, b, 32);
  }

  void constants();
};

}  // namespace jitllm::jit::emit_detail
