// Xbyak emitter of the integer-dot matmul kernels declared in jit_matmul.h (Q8_0, Q4_0, Q4_K, Q6_K
// on AVX2 / AVX-VNNI / AVX-512 VNNI), and the tile shapes chosen per format and ISA.
//
// Kernel structure (all loop counts and activation offsets are constants of the emission):
//   for each group of R rows (then the tail one row at a time):
//     float accumulators acc[r][t] = 0                       (8 lanes each)
//     for each block / super-block of the row:
//       unpack the R weight blocks to unsigned bytes (once, shared by the T tokens)
//       integer dots with each token's quants (vpdpbusd, or vpmaddubsw + vpmaddwd on AVX2),
//       group scales applied in integers, offsets folded in from the activation's block sums,
//       then acc += float(lanes) * (d_weight * d_act)
//     horizontal sums -> out[t][r]
// Only ymm0..15 are used, so every instruction has a VEX form; the AVX-512 level differs in the
// EVEX vpdpbusd. Register budgets per tile are checked at emission (throws on overflow).
#include <xbyak/xbyak.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/jit_matmul.h"
#include "core/error.h"
#include "quant/formats.h"

namespace jitllm::jit {

// The zmm Q8_0 unit sums blocks b and b+1 in the two halves of one accumulator, which is not
// ggml's 8-lane order: its logits are ~2.4e-7 off the reference, enough to flip a near-tie (the
// pydoc-llama Q8_0 "function" prompt changes at its second token). Until it keeps ggml's order,
// AVX-512 machines run the exact ymm unit (EVEX-encoded) for Q8_0.
constexpr bool kQ8_0WideMatchesReference = false;
bool q8_0_wide(Isa isa, int64_t k) {
  return kQ8_0WideMatchesReference && isa == Isa::Avx512Vnni && k % 64 == 0;
}

namespace {

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
  // zmm kernels (AVX-512): Q4_K and Q6_K always; Q8_0 only when q8_0_wide() allows.
  bool wide() const {
    if (key_.isa != Isa::Avx512Vnni) return false;
    return key_.type == QuantType::Q4_K || key_.type == QuantType::Q6_K ||
           (key_.type == QuantType::Q8_0 && q8_0_wide(key_.isa, key_.k));
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
  void unit_q8_0(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    // |w| . sign(a, w): every lane is a true partial dot (no offset to cancel), so the float
    // rounding per lane stays at the size of the dot itself, as in ggml.
    const int T = key_.tokens;
    std::vector<Ymm> u(R), wr(R), dw(R);
    for (int r = 0; r < R; ++r) {
      u[r] = pool.take();
      dw[r] = pool.take();
      wr[r] = pool.take();
      vmovdqu(wr[r], W(r, 2));
      vpabsb(u[r], wr[r]);
      load_half(dw[r], W(r, 0));
    }
    const Ymm da = pool.take(), yi = pool.take(), a = pool.take(), s = pool.take();
    for (int t = 0; t < T; ++t) {
      vbroadcastss(da, ptr[dp + t * P()]);
      vmovdqu(a, A(t, 0));
      for (int r = 0; r < R; ++r) {
        vpsignb(s, a, wr[r]);  // sign of w moved onto the activation
        if (vnni()) {
          vpxor(yi, yi, yi);
          dot(yi, u[r], s, pool);
        } else {
          vpmaddubsw(yi, u[r], s);
          vpmaddwd(yi, yi, ptr[rip + ones16_]);
        }
        vcvtdq2ps(yi, yi);
        vmulps(s, dw[r], da);  // d_w * d_a once, then one rounding per lane (ggml's order)
        vfmadd231ps(acc[r][t], yi, s);
      }
    }
    for (const Ymm& y : {da, yi, a, s}) pool.give(y);
    for (int r = 0; r < R; ++r) {
      pool.give(u[r]);
      pool.give(dw[r]);
      pool.give(wr[r]);
    }
  }

  void unit_q4_0(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    const int T = key_.tokens;
    std::vector<Ymm> u(R), dw(R);
    const Ymm yi = pool.take(), da = pool.take();
    for (int r = 0; r < R; ++r) {
      u[r] = pool.take();
      dw[r] = pool.take();
      // Low nibbles (elements 0..15) in the low lane, high nibbles (16..31) in the high lane.
      vmovdqu(Xmm(u[r].getIdx()), W(r, 2));
      vpsrlw(Xmm(yi.getIdx()), Xmm(u[r].getIdx()), 4);
      vinserti128(u[r], u[r], Xmm(yi.getIdx()), 1);
      vpand(u[r], u[r], ptr[rip + c0F_]);
      load_half(dw[r], W(r, 0));
    }
    for (int t = 0; t < T; ++t) {
      vbroadcastss(da, ptr[dp + t * P()]);
      for (int r = 0; r < R; ++r) {
        vmovd(Xmm(yi.getIdx()), ptr[s32p + t * P()]);  // -8 * sum(a) in lane 0
        dot(yi, u[r], A(t, 0), pool);
        vcvtdq2ps(yi, yi);
        vmulps(yi, yi, da);
        vfmadd231ps(acc[r][t], yi, dw[r]);
      }
    }
    pool.give(yi);
    pool.give(da);
    for (int r = 0; r < R; ++r) {
      pool.give(u[r]);
      pool.give(dw[r]);
    }
  }

  void unit_q4_k(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    const int T = key_.tokens;
    std::vector<Ymm> iacc(T);
    for (int t = 0; t < T; ++t) iacc[t] = pool.take();
    const Ymm q = pool.take(), lo = pool.take(), hi = pool.take(), sa = pool.take(),
              sb = pool.take(), yi = pool.take();
    for (int r = 0; r < R; ++r) {
      // 12 packed bytes -> [sc0..7, m0..7] (see k4_scale_min): X = bytes 0-3,8-11,4-7,8-11;
      // positions 4-7 and 12-15 take their high bits from bytes 0-3 / 4-7 (Y).
      const Xmm X(q.getIdx()), Y(lo.getIdx()), Tn(hi.getIdx());
      vmovdqu(X, W(r, 4));
      vpshufb(Y, X, ptr[rip + ctrlY_]);
      vpshufb(X, X, ptr[rip + ctrlX_]);
      vpsrlw(Tn, X, 4);
      vpand(Tn, Tn, ptr[rip + maskN_]);
      vpand(X, X, ptr[rip + maskA_]);
      vpsrlw(Y, Y, 2);
      vpand(Y, Y, ptr[rip + c30_]);
      vpor(X, X, Tn);
      vpor(X, X, Y);
      vpmovzxbd(sa, X);
      vmovdqu(ptr[rsp + 64 * r], sa);
      vpsrldq(X, X, 8);
      vpmovzxbd(sa, X);
      vmovdqu(ptr[rsp + 64 * r + 32], sa);
      for (int t = 0; t < T; ++t) vpxor(iacc[t], iacc[t], iacc[t]);
      for (int c = 0; c < 4; ++c) {
        vmovdqu(q, W(r, 16 + 32 * c));
        vpand(lo, q, ptr[rip + c0F_]);
        vpsrlw(hi, q, 4);
        vpand(hi, hi, ptr[rip + c0F_]);
        vpbroadcastd(sa, ptr[rsp + 64 * r + 8 * c]);
        vpbroadcastd(sb, ptr[rsp + 64 * r + 8 * c + 4]);
        for (int t = 0; t < T; ++t) {
          vpxor(yi, yi, yi);
          dot(yi, lo, A(t, 64 * c), pool);
          vpmulld(yi, yi, sa);
          vpaddd(iacc[t], iacc[t], yi);
          vpxor(yi, yi, yi);
          dot(yi, hi, A(t, 64 * c + 32), pool);
          vpmulld(yi, yi, sb);
          vpaddd(iacc[t], iacc[t], yi);
        }
      }
      // acc += float(isum) * d * d_act - float(sum mins * group sums) * dmin * d_act
      const Ymm d = lo, dm = hi, da = sa;
      load_half(d, W(r, 0));
      load_half(dm, W(r, 2));
      for (int t = 0; t < T; ++t) {
        vbroadcastss(da, ptr[dp + t * P()]);
        vcvtdq2ps(iacc[t], iacc[t]);
        vmulps(yi, d, da);
        vfmadd231ps(acc[r][t], iacc[t], yi);
        vmovdqu(yi, ptr[rsp + 64 * r + 32]);
        vpmulld(yi, yi, ptr[s32p + t * P()]);
        vcvtdq2ps(yi, yi);
        vmulps(da, da, dm);
        vfnmadd231ps(acc[r][t], yi, da);
      }
    }
    for (const Ymm& y : {q, lo, hi, sa, sb, yi}) pool.give(y);
    for (int t = 0; t < T; ++t) pool.give(iacc[t]);
  }

  void unit_q6_k(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    const int T = key_.tokens;
    std::vector<Ymm> iacc(T);
    for (int t = 0; t < T; ++t) iacc[t] = pool.take();
    const Ymm sc = pool.take(), ql0 = pool.take(), ql1 = pool.take(), qh = pool.take(),
              q = pool.take(), tt = pool.take(), e = pool.take(), yi = pool.take();
    for (int r = 0; r < R; ++r) {
      // The "- 32" of every level: isum starts at -32 * sum_g(scale_g * bsum16_g).
      vpmovsxbw(e, W(r, 192));
      vpxor(yi, yi, yi);
      for (int t = 0; t < T; ++t) {
        vpmaddwd(iacc[t], e, ptr[s16p + t * P()]);
        vpslld(iacc[t], iacc[t], 5);
        vpsubd(iacc[t], yi, iacc[t]);
      }
      vmovdqu(Xmm(sc.getIdx()), W(r, 192));
      for (int h = 0; h < 2; ++h) {
        vmovdqu(ql0, W(r, 64 * h));
        vmovdqu(ql1, W(r, 64 * h + 32));
        vmovdqu(qh, W(r, 128 + 32 * h));
        for (int j = 0; j < 4; ++j) {
          // level = low nibble (ql0/ql1, low or high) | 2 bits of qh at bits 4-5.
          const Ymm& ql = (j & 1) ? ql1 : ql0;
          if (j < 2) {
            vpand(q, ql, ptr[rip + c0F_]);
          } else {
            vpsrlw(q, ql, 4);
            vpand(q, q, ptr[rip + c0F_]);
          }
          switch (j) {
            case 0: vpsllw(tt, qh, 4); break;
            case 1: vpsllw(tt, qh, 2); break;
            case 2: vmovdqa(tt, qh); break;
            default: vpsrlw(tt, qh, 2); break;
          }
          vpand(tt, tt, ptr[rip + c30_]);
          vpor(q, q, tt);
          // lanes 0-3: group 8h+2j, lanes 4-7: group 8h+2j+1
          vpshufb(Xmm(e.getIdx()), Xmm(sc.getIdx()), ptr[rip + q6ctrl_ + 16 * (4 * h + j)]);
          vpmovsxbd(e, Xmm(e.getIdx()));
          for (int t = 0; t < T; ++t) {
            vpxor(yi, yi, yi);
            dot(yi, q, A(t, 128 * h + 32 * j), pool);
            vpmulld(yi, yi, e);
            vpaddd(iacc[t], iacc[t], yi);
          }
        }
      }
      const Ymm d = q, da = tt;
      load_half(d, W(r, 208));
      for (int t = 0; t < T; ++t) {
        vbroadcastss(da, ptr[dp + t * P()]);
        vmulps(da, da, d);
        vcvtdq2ps(iacc[t], iacc[t]);
        vfmadd231ps(acc[r][t], iacc[t], da);
      }
    }
    for (const Ymm& y : {sc, ql0, ql1, qh, q, tt, e, yi}) pool.give(y);
    for (int t = 0; t < T; ++t) pool.give(iacc[t]);
  }

  // ---------------------------------------------------------------- zmm (AVX-512) units
  // Same arithmetic as the ymm units, 16 lanes: one vpdpbusd covers 64 weights (two Q4_K groups,
  // four Q6_K groups or two Q8_0 blocks), group scales come from one vpermd of the 16 unpacked
  // scales. Only EVEX-encodable instructions, so all 32 registers are usable.
  void unit_q8_0_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    // As unit_q8_0 on two blocks per zmm; the sign moves onto the activation with a byte mask
    // (AVX-512 has no vpsignb): a is negated where w < 0 (where w == 0, |w| = 0 anyway).
    const int T = key_.tokens;
    std::vector<Zmm> u(R), dw(R);
    const Zmm y(pool.take().getIdx()), da(pool.take().getIdx()), sc(pool.take().getIdx()),
        t1(pool.take().getIdx()), zs(pool.take().getIdx()), zero(pool.take().getIdx());
    const Opmask neg[4] = {k1, k2, k3, k4};
    vpxord(zero, zero, zero);
    for (int r = 0; r < R; ++r) {
      u[r] = Zmm(pool.take().getIdx());
      dw[r] = Zmm(pool.take().getIdx());
      vmovdqu8(Ymm(u[r].getIdx()), W(r, 2));       // block b
      vinserti64x4(u[r], u[r], W(r, 36), 1);       // block b + 1
      vpmovb2m(neg[r], u[r]);
      vpabsb(u[r], u[r]);
      // [d_b x8, d_b+1 x8]
      vpbroadcastw(Ymm(dw[r].getIdx()), W(r, 0));
      vpbroadcastw(Xmm(t1.getIdx()), W(r, 34));
      vinserti32x4(Ymm(dw[r].getIdx()), Ymm(dw[r].getIdx()), Xmm(t1.getIdx()), 1);
      vcvtph2ps(dw[r], Ymm(dw[r].getIdx()));
    }
    for (int t = 0; t < T; ++t) {
      vbroadcastss(Ymm(da.getIdx()), ptr[dp + t * P()]);
      vbroadcastss(Ymm(t1.getIdx()), ptr[dp + t * P() + 4]);
      vinsertf64x4(da, da, Ymm(t1.getIdx()), 1);
      for (int r = 0; r < R; ++r) {
        vmovdqu8(zs, A(t, 0));
        vpsubb(zs | neg[r], zero, A(t, 0));
        vpxord(y, y, y);
        vpdpbusd(y, u[r], zs, EvexEncoding);
        vcvtdq2ps(y, y);
        vmulps(sc, dw[r], da);
        vfmadd231ps(Zmm(acc[r][t].getIdx()), y, sc);
      }
    }
    for (const Zmm& z : {y, da, sc, t1, zs, zero}) pool.give(Ymm(z.getIdx()));
    for (int r = 0; r < R; ++r) {
      pool.give(Ymm(u[r].getIdx()));
      pool.give(Ymm(dw[r].getIdx()));
    }
  }

  void unit_q4_k_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    const int T = key_.tokens;
    std::vector<Zmm> iacc(T);
    for (int t = 0; t < T; ++t) iacc[t] = Zmm(pool.take().getIdx());
    auto z = [&] { return Zmm(pool.take().getIdx()); };
    // GEMM tiles (transposed_da) load the vpermd indices per use and reuse q for the scales,
    // which leaves registers for 8 tokens; the T = 1 kernel keeps them in registers.
    const bool lean = transposed_da();
    const Zmm sc = z(), scw = z(), q = z(), h = z(), s = z(), y = z();
    const Zmm d = lean ? q : z(), dm = lean ? q : z();
    Zmm idx[4];
    for (int c = 0; c < 4 && !lean; ++c) {
      idx[c] = z();
      vmovdqu32(idx[c], ptr[rip + k4idx_ + 64 * c]);
    }
    for (int r = 0; r < R; ++r) {
      const Xmm X(q.getIdx()), Y(h.getIdx()), Tn(s.getIdx());
      vmovdqu8(X, W(r, 4));
      vpshufb(Y, X, ptr[rip + ctrlY_]);
      vpshufb(X, X, ptr[rip + ctrlX_]);
      vpsrlw(Tn, X, 4);
      vpandd(Tn, Tn, ptr[rip + maskN_]);
      vpandd(X, X, ptr[rip + maskA_]);
      vpsrlw(Y, Y, 2);
      vpandd(Y, Y, ptr[rip + c30_]);
      vpternlogd(X, Tn, Y, 0xFE);  // X | Tn | Y
      vpmovzxbd(sc, X);            // [sc0..7, m0..7]
      vpslld(scw, sc, 16);
      vpord(scw, scw, sc);  // each scale as two int16 (one vpdpwssd multiplier per pair)
      for (int t = 0; t < T; ++t) vpxord(iacc[t], iacc[t], iacc[t]);
      for (int c = 0; c < 4; ++c) {
        // [low nibbles (group 2c) | high nibbles (group 2c+1)] = activation bytes 64c..64c+63
        vmovdqu8(Ymm(q.getIdx()), W(r, 16 + 32 * c));
        vpsrlw(Ymm(h.getIdx()), Ymm(q.getIdx()), 4);
        vinserti64x4(q, q, Ymm(h.getIdx()), 1);
        vpandd(q, q, ptr_b[rip + c0F_]);
        if (lean) {
          vmovdqu32(s, ptr[rip + k4idx_ + 64 * c]);
          vpermd(s, s, scw);
        } else {
          vpermd(s, idx[c], scw);
        }
        // Pair sums in int16 (|.| <= 2 * 15 * 128), times the group scale into int32: two
        // multiplier-pipe ops per 64 weights and token (vpdpbusd + vpmulld + vpaddd was three).
        for (int t = 0; t < T; ++t) {
          vpmaddubsw(y, q, A(t, 64 * c));
          vpdpwssd(iacc[t], y, s, EvexEncoding);
        }
      }
      vextracti64x4(Ymm(h.getIdx()), sc, 1);  // the 8 mins
      if (lean) {
        // The same products (d_w * d_a, dmin_w * d_a) for all T tokens in one vmulps each,
        // then one broadcast-operand FMA per token: equal floats, fewer multiplier-pipe ops.
        const int prod = kProdOff + 128 * r;
        for (int i = 0; i < 2; ++i) {
          vpbroadcastw(Ymm(q.getIdx()), W(r, 2 * i));
          vcvtph2ps(q, Ymm(q.getIdx()));
          vmulps(q, q, ptr[tmp]);
          vmovups(ptr[rsp + prod + 64 * i], q);
        }
        for (int t = 0; t < T; ++t) {
          vcvtdq2ps(iacc[t], iacc[t]);
          vfmadd231ps(Zmm(acc[r][t].getIdx()), iacc[t], ptr_b[rsp + prod + 4 * t]);
        }
        // Mins of all tokens at once: sum_g m_g * sum32_g (lane t) as 4 vpdpwssd over the
        // transposed group-pair sums, times dmin_w * d_a (lane t) into the row's accumulator.
        const Ymm hy(h.getIdx()), yy(y.getIdx());
        vpsrlq(yy, hy, 16);
        vpord(yy, yy, hy);  // low dword of qword j: m_2j | m_2j+1 << 16
        vpmovqd(ptr[rsp + kMinsOff + 16 * r], yy);
        vpxord(s, s, s);
        for (int j = 0; j < 4; ++j) {
          vmovdqu32(y, ptr[tmp + 64 + 64 * j]);
          vpdpwssd(s, y, ptr_b[rsp + kMinsOff + 16 * r + 4 * j], EvexEncoding);
        }
        vcvtdq2ps(s, s);
        vfmadd231ps(macc_[size_t(r)], s, ptr[rsp + prod + 64]);
        continue;
      }
      vpbroadcastw(Ymm(d.getIdx()), W(r, 0));
      vcvtph2ps(d, Ymm(d.getIdx()));
      vpbroadcastw(Ymm(dm.getIdx()), W(r, 2));
      vcvtph2ps(dm, Ymm(dm.getIdx()));
      for (int t = 0; t < T; ++t) {
        vbroadcastss(s, ptr[dp + t * P()]);
        vcvtdq2ps(iacc[t], iacc[t]);
        vmulps(y, d, s);
        vfmadd231ps(Zmm(acc[r][t].getIdx()), iacc[t], y);
        vpmulld(Ymm(y.getIdx()), Ymm(h.getIdx()), ptr[s32p + t * P()]);  // upper lanes zeroed
        vcvtdq2ps(y, y);
        vmulps(s, s, dm);
        vfnmadd231ps(Zmm(acc[r][t].getIdx()), y, s);
      }
    }
    for (const Zmm& v : {sc, scw, q, h, s, y}) pool.give(Ymm(v.getIdx()));
    if (!lean)
      for (const Zmm& v : {d, dm, idx[0], idx[1], idx[2], idx[3]}) pool.give(Ymm(v.getIdx()));
    for (int t = 0; t < T; ++t) pool.give(Ymm(iacc[t].getIdx()));
  }

  void unit_q6_k_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
    const int T = key_.tokens;
    std::vector<Zmm> iacc(T);
    for (int t = 0; t < T; ++t) iacc[t] = Zmm(pool.take().getIdx());
    auto z = [&] { return Zmm(pool.take().getIdx()); };
    // GEMM tiles (transposed_da): the scale vectors take the registers of ql / qh (dead once
    // qa / qb are built), the unpack temporary that of y, vpermd indices are loaded per use:
    // room for 8 tokens. The T = 1 kernel keeps them all apart.
    const bool lean = transposed_da();
    const Zmm sc = z(), ql = z(), qh = z(), qa = z(), qb = z(), y = z();
    const Zmm tt = lean ? y : z(), sa = lean ? ql : z(), sb = lean ? qh : z();
    Zmm idx[4];
    for (int i = 0; i < 4 && !lean; ++i) {
      idx[i] = z();
      vmovdqu32(idx[i], ptr[rip + k6idx_ + 64 * i]);
    }
    for (int r = 0; r < R; ++r) {
      // The "- 32" of every level: isum starts at -32 * sum_g(scale_g * bsum16_g).
      vpmovsxbw(Ymm(sa.getIdx()), W(r, 192));
      vpxord(y, y, y);
      for (int t = 0; t < T; ++t) {
        vpmaddwd(Ymm(iacc[t].getIdx()), Ymm(sa.getIdx()), ptr[s16p + t * P()]);
        vpslld(Ymm(iacc[t].getIdx()), Ymm(iacc[t].getIdx()), 5);
        vpsubd(iacc[t], y, iacc[t]);
      }
      vpmovsxbd(sc, W(r, 192));  // 16 group scales
      vpslld(tt, sc, 16);
      vpandd(sc, sc, ptr_b[rip + lo16_]);
      vpord(sc, sc, tt);  // each scale as two int16 (the vpdpwssd multiplier of a pair)
      for (int h = 0; h < 2; ++h) {
        vmovdqu8(Ymm(ql.getIdx()), W(r, 64 * h));
        vinserti64x4(ql, ql, W(r, 64 * h + 32), 1);  // [ql0 | ql1]
        vmovdqu8(Ymm(qh.getIdx()), W(r, 128 + 32 * h));
        vpsrlw(Ymm(tt.getIdx()), Ymm(qh.getIdx()), 2);
        vinserti64x4(qh, qh, Ymm(tt.getIdx()), 1);  // [qh | qh >> 2]
        // elements 128h + 0..63: low nibbles | bits 0-1 of (qh, qh >> 2) at bits 4-5
        vpandd(qa, ql, ptr_b[rip + c0F_]);
        vpsllw(tt, qh, 4);
        vpandd(tt, tt, ptr_b[rip + c30_]);
        vpord(qa, qa, tt);
        // elements 128h + 64..127: high nibbles | bits 4-5 of (qh, qh >> 2)
        vpsrlw(qb, ql, 4);
        vpandd(qb, qb, ptr_b[rip + c0F_]);
        vpandd(tt, qh, ptr_b[rip + c30_]);
        vpord(qb, qb, tt);
        if (lean) {
          vmovdqu32(sa, ptr[rip + k6idx_ + 64 * (2 * h)]);
          vpermd(sa, sa, sc);
          vmovdqu32(sb, ptr[rip + k6idx_ + 64 * (2 * h + 1)]);
          vpermd(sb, sb, sc);
        } else {
          vpermd(sa, idx[2 * h], sc);
          vpermd(sb, idx[2 * h + 1], sc);
        }
        // Pair sums in int16 (|.| <= 2 * 63 * 128), then times the group scale into int32.
        for (int t = 0; t < T; ++t) {
          vpmaddubsw(y, qa, A(t, 128 * h));
          vpdpwssd(iacc[t], y, sa, EvexEncoding);
          vpmaddubsw(y, qb, A(t, 128 * h + 64));
          vpdpwssd(iacc[t], y, sb, EvexEncoding);
        }
      }
      vpbroadcastw(Ymm(qa.getIdx()), W(r, 208));
      vcvtph2ps(qa, Ymm(qa.getIdx()));
      if (transposed_da()) {  // as in unit_q4_k_wide: d_a * d_w for all tokens in one vmulps
        const int prod = kProdOff + 128 * r;
        vmulps(qa, qa, ptr[tmp]);
        vmovups(ptr[rsp + prod], qa);
        for (int t = 0; t < T; ++t) {
          vcvtdq2ps(iacc[t], iacc[t]);
          vfmadd231ps(Zmm(acc[r][t].getIdx()), iacc[t], ptr_b[rsp + prod + 4 * t]);
        }
        continue;
      }
      for (int t = 0; t < T; ++t) {
        vbroadcastss(tt, ptr[dp + t * P()]);
        vmulps(tt, tt, qa);
        vcvtdq2ps(iacc[t], iacc[t]);
        vfmadd231ps(Zmm(acc[r][t].getIdx()), iacc[t], tt);
      }
    }
    for (const Zmm& v : {sc, ql, qh, qa, qb, y}) pool.give(Ymm(v.getIdx()));
    if (!lean)
      for (const Zmm& v : {tt, sa, sb, idx[0], idx[1], idx[2], idx[3]}) pool.give(Ymm(v.getIdx()));
    for (int t = 0; t < T; ++t) pool.give(Ymm(iacc[t].getIdx()));
  }

  // ---------------------------------------------------------------- Q8_0 GEMM, token pairs
  // AVX-512 prefill Q8_0 with ggml's exact float order: a zmm holds two tokens of one block
  // (lanes 0-7: token t, 8-15: token t+1), so each 8-lane half is exactly the ymm unit's
  // accumulator (per lane: acc = fma(float(isum), d_w * d_a, acc), blocks in order) and halves
  // are reduced separately. The signed x signed dot runs as (w + 128) . a - 128 * sum4(a): the
  // correction is computed once per token pair and block and shared by the R rows, the weight
  // block is broadcast to both halves once and shared by the T tokens. Integer lanes are exact,
  // so the result is bit-identical to the sign-trick ymm unit.
  void body_q8_0_pairs(int R) {
    const int T = key_.tokens, TP = (T + 1) / 2;
    Pool pool;
    pool.size = 32;
    auto z = [&] { return Zmm(pool.take().getIdx()); };
    std::vector<std::vector<Zmm>> acc(R, std::vector<Zmm>(TP));
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < TP; ++p) {
        acc[r][p] = z();
        vpxord(acc[r][p], acc[r][p], acc[r][p]);
      }
    std::vector<Zmm> wu(R), dw(R);
    for (int r = 0; r < R; ++r) {
      wu[r] = z();
      dw[r] = z();
    }
    const Zmm c80 = z(), a = z(), c = z(), dap = z(), y = z(), s = z(), zero = z();
    vpbroadcastd(c80, ptr[rip + c80_]);
    vpxord(zero, zero, zero);
    mov(wp, wrow);
    lea(ap, ptr[act + int(al_.qs)]);
    lea(dp, ptr[act + int(al_.d)]);
    mov(cnt, key_.k / 32);
    Label loop;
    L(loop);
    for (int r = 0; r < R; ++r) {
      vbroadcasti64x4(wu[r], W(r, 2));
      vpxord(wu[r], wu[r], c80);  // w + 128 as unsigned bytes
      vpbroadcastw(Ymm(dw[r].getIdx()), W(r, 0));
      vcvtph2ps(dw[r], Ymm(dw[r].getIdx()));
    }
    for (int p = 0; p < TP; ++p) {
      const int t0 = 2 * p, t1 = std::min(2 * p + 1, T - 1);  // an odd tail repeats t0
      vmovdqu8(Ymm(a.getIdx()), A(t0, 0));
      vinserti64x4(a, a, A(t1, 0), 1);
      vpxord(c, c, c);
      vpdpbusd(c, c80, a, EvexEncoding);  // 128 * sum4(a) per lane
      vpsubd(c, zero, c);                 // the start value of every row's dot
      vbroadcastss(Ymm(dap.getIdx()), ptr[dp + t0 * P()]);
      vbroadcastss(Ymm(s.getIdx()), ptr[dp + t1 * P()]);
      vinsertf32x8(dap, dap, Ymm(s.getIdx()), 1);
      for (int r = 0; r < R; ++r) {
        vmovdqa32(y, c);  // a register move (eliminated at rename)
        vpdpbusd(y, wu[r], a, EvexEncoding);
        vcvtdq2ps(y, y);
        vmulps(s, dw[r], dap);  // d_w * d_a, rounded once as in ggml
        vfmadd231ps(acc[r][p], y, s);
      }
    }
    add(wp, 34);
    add(ap, 32);
    add(dp, 4);
    dec(cnt);
    jnz(loop, T_NEAR);
    // Each half reduced as ggml's hsum_float_8 (high 128 + low 128, then pairs).
    auto hsum8 = [&](const Ymm& v, const Address& dst) {
      const Xmm x(v.getIdx()), xt(s.getIdx());
      vextractf32x4(xt, v, 1);
      vaddps(x, x, xt);
      vmovhlps(xt, xt, x);
      vaddps(x, x, xt);
      vmovshdup(xt, x);
      vaddss(x, x, xt);
      vmovss(dst, x);
    };
    for (int p = 0; p < TP; ++p) {
      const int t0 = 2 * p, t1 = 2 * p + 1;
      for (int r = 0; r < R; ++r) {
        if (t1 < T) {
          vextractf64x4(Ymm(y.getIdx()), acc[r][p], 1);
          mov(tmp, ostride);
          imul(tmp, tmp, t1);
          add(tmp, out);
          hsum8(Ymm(y.getIdx()), ptr[tmp + 4 * r]);
        }
        mov(tmp, ostride);
        imul(tmp, tmp, t0);
        add(tmp, out);
        hsum8(Ymm(acc[r][p].getIdx()), ptr[tmp + 4 * r]);
      }
    }
  }

  // ---------------------------------------------------------------- structure
  struct Geometry {
    int block_bytes, unit_elems, d_step, s32_step, s16_step;
  };
  Geometry geometry() const {
    switch (key_.type) {
      case QuantType::Q8_0: return wide() ? Geometry{68, 64, 8, 8, 0} : Geometry{34, 32, 4, 4, 0};
      case QuantType::Q4_0: return {18, 32, 4, 4, 0};
      case QuantType::Q4_K: return {144, 256, 4, 32, 32};
      case QuantType::Q6_K: return {210, 256, 4, 32, 32};
      default: throw_error("jit matmul: no emitter for {}", quant_name(key_.type));
    }
  }

  void hsum_store(const Ymm& y, const Address& dst, Pool& pool, const Address* minus = nullptr) {
    const Ymm t = pool.take();
    const Xmm x(y.getIdx()), xt(t.getIdx());
    if (wide()) {
      vextractf64x4(t, Zmm(y.getIdx()), 1);
      vaddps(y, y, t);
      vextractf32x4(xt, y, 1);  // EVEX: t may be ymm16+
    } else {
      vextractf128(xt, y, 1);
    }
    vaddps(x, x, xt);
    vmovhlps(xt, xt, x);
    vaddps(x, x, xt);
    vmovshdup(xt, x);
    vaddss(x, x, xt);
    if (minus) vsubss(x, x, *minus);
    vmovss(dst, x);
    pool.give(t);
  }

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

  void body(int R) {
    if (q8_0_pairs()) return body_q8_0_pairs(R);
    const Geometry g = geometry();
    const int T = key_.tokens;
    Pool pool;
    pool.size = wide() ? 32 : 16;
    std::vector<std::vector<Ymm>> acc(R, std::vector<Ymm>(T));
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        acc[r][t] = pool.take();
        if (wide())
          vpxord(Zmm(acc[r][t].getIdx()), Zmm(acc[r][t].getIdx()), Zmm(acc[r][t].getIdx()));
        else
          vxorps(acc[r][t], acc[r][t], acc[r][t]);
      }
    // Q4_K GEMM tiles: per row, the mins term of all T tokens in one vector (lane t), summed
    // over the super-blocks and subtracted after the horizontal sum (as ggml's acc_m).
    macc_.clear();
    if (transposed_da() && key_.type == QuantType::Q4_K)
      for (int r = 0; r < R; ++r) {
        macc_.push_back(Zmm(pool.take().getIdx()));
        vpxord(macc_.back(), macc_.back(), macc_.back());
      }
    mov(wp, wrow);
    lea(ap, ptr[act + int(al_.qs)]);
    lea(dp, ptr[act + int(al_.d)]);
    lea(s32p, ptr[act + int(al_.s32)]);
    lea(s16p, ptr[act + int(al_.s16)]);
    mov(cnt, key_.k / g.unit_elems);
    if (transposed_da()) lea(tmp, ptr[rsp + kDaTOff]);
    Label loop;
    L(loop);
    if (wide()) {
      switch (key_.type) {
        case QuantType::Q8_0: unit_q8_0_wide(R, acc, pool); break;
        case QuantType::Q4_K: unit_q4_k_wide(R, acc, pool); break;
        default: unit_q6_k_wide(R, acc, pool); break;
      }
    } else switch (key_.type) {
      case QuantType::Q8_0: unit_q8_0(R, acc, pool); break;
      case QuantType::Q4_0: unit_q4_0(R, acc, pool); break;
      case QuantType::Q4_K: unit_q4_k(R, acc, pool); break;
      case QuantType::Q6_K: unit_q6_k(R, acc, pool); break;
      default: break;
    }
    add(wp, g.block_bytes);
    add(ap, g.unit_elems);
    add(dp, g.d_step);
    add(s32p, g.s32_step);
    if (g.s16_step) add(s16p, g.s16_step);
    if (transposed_da()) add(tmp, da_rec());
    dec(cnt);
    jnz(loop, T_NEAR);
    for (size_t r = 0; r < macc_.size(); ++r) vmovups(ptr[rsp + kMaccOff + 64 * int(r)], macc_[r]);
    mov(tmp, out);
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) {
        if (macc_.empty()) {
          hsum_store(acc[r][t], ptr[tmp + 4 * r], pool);
        } else {
          const Address m = ptr[rsp + kMaccOff + 64 * r + 4 * t];
          hsum_store(acc[r][t], ptr[tmp + 4 * r], pool, &m);
        }
      }
      if (t + 1 < T) add(tmp, ostride);
    }
    for (const Zmm& m : macc_) pool.give(Ymm(m.getIdx()));
  }

  void advance_rows(int R) {
    switch (R) {
      case 1: add(wrow, stride); break;
      case 2: lea(wrow, ptr[wrow + stride * 2]); break;
      case 3: add(wrow, stride3); break;
      default: lea(wrow, ptr[wrow + stride * 4]); break;
    }
    add(out, 4 * R);
    sub(nrows, R);
  }

  void emit() {
    const int R = key_.rows;
    if (key_.k <= 0 || key_.k % geometry().unit_elems != 0)
      throw_error("jit matmul: k {} is not a multiple of {}'s block", key_.k,
                  quant_name(key_.type));
    for (const Reg64& r : {rbx, rbp, r12, r13, r14, r15}) push(r);
    mov(wrow, ptr[rdi + offsetof(MatArgs, w)]);
    mov(stride, ptr[rdi + offsetof(MatArgs, w_stride)]);
    mov(nrows, ptr[rdi + offsetof(MatArgs, n_rows)]);
    mov(act, ptr[rdi + offsetof(MatArgs, act)]);
    mov(out, ptr[rdi + offsetof(MatArgs, out)]);
    mov(ostride, ptr[rdi + offsetof(MatArgs, out_stride)]);
    lea(stride3, ptr[stride + stride * 2]);
    mov(rdi, rsp);  // the caller's stack pointer (rdi is free once the arguments are read)
    sub(rsp, stack_bytes());
    and_(rsp, -64);
    if (transposed_da()) {
      // daT[sb][t] = d_a of token t, super-block sb; lanes >= T zero.
      const Reg64 src = rax, dst = rbx;
      lea(src, ptr[act + int(al_.d)]);
      lea(dst, ptr[rsp + kDaTOff]);
      lea(s32p, ptr[act + int(al_.s32)]);
      mov(cnt, key_.k / 256);
      vpxord(zmm0, zmm0, zmm0);
      Label tr;
      L(tr);
      vmovups(ptr[dst], zmm0);
      for (int t = 0; t < key_.tokens; ++t) {
        mov(tmp.cvt32(), ptr[src + t * P()]);
        mov(ptr[dst + 4 * t], tmp.cvt32());
      }
      if (key_.type == QuantType::Q4_K) {
        // bsT[j][t] = (sum32 of group 2j | sum32 of group 2j+1 << 16) of token t.
        for (int j = 0; j < 4; ++j) vmovups(ptr[dst + 64 + 64 * j], zmm0);
        for (int t = 0; t < key_.tokens; ++t) {
          vmovdqu(ymm1, ptr[s32p + t * P()]);
          vpmovdw(xmm1, ymm1);
          vmovd(ptr[dst + 64 + 4 * t], xmm1);
          for (int j = 1; j < 4; ++j) vpextrd(ptr[dst + 64 + 64 * j + 4 * t], xmm1, uint8_t(j));
        }
        add(s32p, 32);
      }
      add(src, 4);
      add(dst, da_rec());
      dec(cnt);
      jnz(tr, T_NEAR);
    }

    Label main_loop, tail_loop, done;
    L(main_loop);
    cmp(nrows, R);
    jl(tail_loop, T_NEAR);
    body(R);
    advance_rows(R);
    jmp(main_loop, T_NEAR);
    L(tail_loop);
    if (R > 1) {
      test(nrows, nrows);
      jz(done, T_NEAR);
      body(1);
      advance_rows(1);
      jmp(tail_loop, T_NEAR);
    }
    L(done);
    vzeroupper();
    mov(rsp, rdi);
    for (const Reg64& r : {r15, r14, r13, r12, rbp, rbx}) pop(r);
    ret();
    constants();
  }

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

  void constants() {
    splat(c0F_, 0x0F);
    splat(c30_, 0x30);
    splat(c80_, 0x80);
    const uint8_t lo16[4] = {0xFF, 0xFF, 0, 0};
    bytes(lo16_, lo16, 4);
    uint8_t ones[32];
    for (int i = 0; i < 32; ++i) ones[i] = i % 2 == 0 ? 1 : 0;
    bytes(ones16_, ones, 32);
    const uint8_t cx[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
    bytes(ctrlX_, cx, 16);
    const uint8_t cy[16] = {0x80, 0x80, 0x80, 0x80, 0, 1, 2, 3, 0x80, 0x80, 0x80, 0x80, 4, 5, 6, 7};
    bytes(ctrlY_, cy, 16);
    const uint8_t ma[16] = {0x3F, 0x3F, 0x3F, 0x3F, 0x0F, 0x0F, 0x0F, 0x0F,
                            0x3F, 0x3F, 0x3F, 0x3F, 0,    0,    0,    0};
    bytes(maskA_, ma, 16);
    const uint8_t mn[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0F, 0x0F, 0x0F, 0x0F};
    bytes(maskN_, mn, 16);
    uint8_t q6[8 * 16];
    for (int i = 0; i < 8; ++i)
      for (int b = 0; b < 16; ++b) q6[16 * i + b] = b < 4 ? uint8_t(2 * i) : b < 8 ? uint8_t(2 * i + 1) : 0x80;
    bytes(q6ctrl_, q6, 8 * 16);
    // vpermd indices: Q4_K chunk c -> [2c x8, 2c+1 x8]; Q6_K quarter i -> groups 4i..4i+3 x4.
    align(64);
    L(k4idx_);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 16; ++l) dd(uint32_t(2 * c + l / 8));
    L(k6idx_);
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 16; ++l) dd(uint32_t(4 * i + l / 4));
  }
};

}  // namespace

struct MatKernel::Impl {
  explicit Impl(const MatKey& key) : gen(key) {}
  Emitter gen;
};

MatKernel::MatKernel(const MatKey& key) : key_(key), impl_(std::make_unique<Impl>(key)) {
  fn_ = impl_->gen.getCode<MatFn>();
}

MatKernel::~MatKernel() = default;

std::vector<uint8_t> MatKernel::code() const {
  const uint8_t* p = impl_->gen.getCode();
  return std::vector<uint8_t>(p, p + impl_->gen.getSize());
}

TileShape decode_tile(QuantType type, Isa isa, int64_t k) {
  if (type == QuantType::Q8_0 && !q8_0_wide(isa, k)) return {2, 1};
  return {4, 1};
}

TileShape gemm_tile(QuantType type, Isa isa, int64_t k) {
  switch (type) {
    case QuantType::Q8_0:
      if (isa == Isa::Avx512Vnni) return {4, 8};  // body_q8_0_pairs: 4 rows x 4 token pairs
      return TileShape{2, 2};
    case QuantType::Q4_0: return {2, 4};
    case QuantType::Q4_K: return isa == Isa::Avx512Vnni ? TileShape{2, 8} : TileShape{2, 3};
    case QuantType::Q6_K: return isa == Isa::Avx512Vnni ? TileShape{2, 8} : TileShape{2, 2};
    default: return {1, 1};
  }
}

}  // namespace jitllm::jit
