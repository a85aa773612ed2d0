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
// The ymm units here use only ymm0..15, so every instruction has a VEX form (the AVX-512 level
// differs in the EVEX vpdpbusd); AVX-512 runs the zmm K units and the Q8_0 token-pair GEMM of
// jit_matmul_emit_zmm.cpp. Register budgets per tile are checked at emission (throws on overflow).
#include <algorithm>
#include <cstring>

#include "backend/cpu/jit_emit_q6k.h"
#include "backend/cpu/jit_matmul_emitter.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace emit_detail {

void Emitter::unit_q8_0(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
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

void Emitter::unit_q4_0(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
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

void Emitter::unit_q4_k(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
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

void Emitter::unit_q6_k(int R, const std::vector<std::vector<Ymm>>& acc, Pool& pool) {
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
        emit_q6k_levels(*this, q, tt, ql0, ql1, qh, j, c0F_, c30_);
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

Emitter::Geometry Emitter::geometry() const {
  switch (key_.type) {
    case QuantType::Q8_0: return {34, 32, 4, 4, 0};
    case QuantType::Q4_0: return {18, 32, 4, 4, 0};
    case QuantType::Q4_K: return {144, 256, 4, 32, 32};
    case QuantType::Q6_K: return {210, 256, 4, 32, 32};
    default: throw_error("jit matmul: no emitter for {}", quant_name(key_.type));
  }
}

void Emitter::hsum_store(const Ymm& y, const Address& dst, Pool& pool, const Address* minus) {
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

void Emitter::body(int R) {
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

void Emitter::advance_rows(int R) {
  switch (R) {
    case 1: add(wrow, stride); break;
    case 2: lea(wrow, ptr[wrow + stride * 2]); break;
    case 3: add(wrow, stride3); break;
    default: lea(wrow, ptr[wrow + stride * 4]); break;
  }
  add(out, 4 * R);
  sub(nrows, R);
}

void Emitter::emit() {
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

void Emitter::constants() {
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

}  // namespace emit_detail

using emit_detail::Emitter;

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
  if (type == QuantType::Q8_0) return {2, 1};  // the ymm unit: ggml's lane order
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
