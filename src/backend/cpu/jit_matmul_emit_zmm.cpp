// The AVX-512 units of the matmul emitter (class in jit_matmul_emitter.h): zmm Q4_K / Q6_K with
// the same arithmetic as the ymm units on 16 lanes (one vpmaddubsw + vpdpwssd covers 64 weights:
// two Q4_K groups or four Q6_K groups, group scales as int16 pairs from one vpermd), GEMM tiles
// with the activation scales (and Q4_K's group sums) transposed on the stack, and the Q8_0
// token-pair GEMM that keeps ggml's per-lane float order.
#include <algorithm>

#include "backend/cpu/jit_matmul_emitter.h"
#include "quant/formats.h"

namespace jitllm::jit::emit_detail {

void Emitter::unit_q4_k_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
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

void Emitter::unit_q6_k_wide(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
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

// AVX-512 prefill Q8_0 with ggml's exact float order: a zmm holds two tokens of one block
// (lanes 0-7: token t, 8-15: token t+1), so each 8-lane half is exactly the ymm unit's
// accumulator (per lane: acc = fma(float(isum), d_w * d_a, acc), blocks in order) and halves
// are reduced separately. The signed x signed dot runs as (w + 128) . a - 128 * sum4(a): the
// correction is computed once per token pair and block and shared by the R rows, the weight
// block is broadcast to both halves once and shared by the T tokens. Integer lanes are exact,
// so the result is bit-identical to the sign-trick ymm unit.
void Emitter::body_q8_0_pairs(int R) {
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

}  // namespace jitllm::jit::emit_detail
