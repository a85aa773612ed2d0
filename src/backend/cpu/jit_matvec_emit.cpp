// Xbyak emitter of the decode matvec kernels declared in jit_matvec.h (Q4_K, Q6_K, Q8_0 on AVX2,
// AVX-VNNI and AVX-512 VNNI/BW), their rows per pass and the process-wide kernel cache.
//
// Kernel structure (loop counts and record offsets are constants of the emission):
//   for each group of R rows (then the tail one row at a time):
//     float accumulators acc[r] = 0 (16 lanes; ymm kernels 8)
//     for each super-block / block: integer dot of the R rows with the packed activation, exact
//       per super-block (Q4_K/Q6_K) or per 8-lane block (Q8_0), then acc += float(isum) * scales
//     horizontal sums -> out[r]
// Ops per 256 weights and row, Q4_K: 2 loads, 6 nibble ops, 4 vpmaddubsw, 4 vpdpwssd, ~14 for the
// 12-byte scales, ~8 float ops (the old T=1 unit: ~58). Q6_K likewise (~37 vs ~56).
#include <xbyak/xbyak.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/jit_emit_q6k.h"
#include "backend/cpu/jit_matvec.h"
#include "backend/cpu/jit_repack.h"
#include "core/error.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

using namespace Xbyak;

constexpr int kKRecord = 320;   // activation record per super-block (jit_matvec_act.cpp)
constexpr int kQ8Record = 128;  // activation record per Q8_0 block

class Emitter : public CodeGenerator {
 public:
  explicit Emitter(const MatvecKey& key)
      : CodeGenerator(4096, AutoGrow),
        key_(key),
        f_(key.packed ? repack_fields(key.type) : RepackFields{}) {
    if (!matvec_supported(key.type, key.isa, key.k))
      throw_error("jit matvec: no kernel for {} k={} on {}", quant_name(key.type), key.k,
                  isa_name(key.isa));
    if (key.packed && key.rows != kRepackGroup)
      throw_error("jit matvec: the interleaved layout takes {} rows per pass, not {}",
                  kRepackGroup, key.rows);
    if (key.rows < 1 || key.rows > 4 ||
        (key.type == QuantType::Q8_0 && key.isa == Isa::Avx512Vnni && key.rows % 2 != 0))
      throw_error("jit matvec: {} rows per pass out of range for {}", key.rows,
                  quant_name(key.type));
    emit();
    ready();
  }

 private:
  const Reg64 wrow = rsi, stride = rdx, stride3 = rcx, nrows = r8, act = r9, out = r10, wp = rax,
              ap = rbx, dp = rbp, cnt = r14, tmp = r15, sp = r12, srow = r13;

  // zmm0..31 handed out by index; every kernel fits in 32.
  struct Pool {
    uint32_t used = 0;
    Zmm take() {
      for (int i = 0; i < 32; ++i)
        if (!(used & (1u << i))) {
          used |= 1u << i;
          return Zmm(i);
        }
      throw_error("jit matvec: out of vector registers");
    }
  };

  MatvecKey key_;
  RepackFields f_;  // packed: where the GGUF block's fields went (jit_repack.h)
  int g_ = 1;       // rows of the pass being emitted (R, or 1 in the tail)
  Label c0F_, c30_, c80_, ones16_, q6yctrl_, ctrlX_, ctrlY_, maskA_, maskN_, q4idx_, q6idx_;

  // Byte `disp` of row r's current block, as if in GGUF layout; packed kernels map it into the
  // interleaved planes (wp: the group's record in the main plane, sp: in the side plane).
  Address W(int r, int disp) {
    if (key_.packed) {
      const RepackFields& f = f_;
      if (f.hdr && disp >= f.hdr_from && disp < f.hdr_from + f.hdr)
        return ptr[wp + r * f.hdr + (disp - f.hdr_from)];
      if (disp >= f.body_from && disp < f.body_from + f.body)
        return ptr[wp + g_ * f.hdr + r * f.body + (disp - f.body_from)];
      if (f.side && disp >= f.side_from && disp < f.side_from + f.side)
        return ptr[sp + r * f.side + (disp - f.side_from)];
      throw_error("jit matvec: byte {} of a {} block is in no plane", disp, quant_name(key_.type));
    }
    switch (r) {
      case 0: return ptr[wp + disp];
      case 1: return ptr[wp + stride + disp];
      case 2: return ptr[wp + stride * 2 + disp];
      default: return ptr[wp + stride3 + disp];
    }
  }
  static Ymm Y(const Zmm& z) { return Ymm(z.getIdx()); }
  bool wide() const { return key_.isa == Isa::Avx512Vnni; }
  static Xmm X(const Zmm& z) { return Xmm(z.getIdx()); }

  // ---------------------------------------------------------------- Q4_K
  // Per row: scales -> words [sc0..7, m0..7]; weights bytes 64i..64i+63: low nibbles are groups
  // 4i, 4i+2 and high nibbles 4i+1, 4i+3 (the activation is packed in that order); vpmaddubsw
  // gives 16-bit pair sums, vpdpwssd multiplies them by the group scale words and accumulates.
  // Mins: one vpmaddwd of the min words with the activation's group sums.
  struct Q4K {
    Zmm idx[4], sw, t, u, v, q, lo, hi, p, iacc, msum, f, fd;
  };
  Q4K q4k_setup(Pool& pool) {
    Q4K s;
    for (int i = 0; i < 4; ++i) {
      s.idx[i] = pool.take();
      vmovdqu16(s.idx[i], ptr[rip + q4idx_ + 64 * i]);
    }
    for (Zmm* z : {&s.sw, &s.t, &s.u, &s.v, &s.q, &s.lo, &s.hi, &s.p, &s.iacc, &s.msum, &s.f,
                   &s.fd})
      *z = pool.take();
    return s;
  }
  void q4k_row(const Q4K& s, int r, const Zmm& acc) {
    // 12 packed bytes -> [sc0..7, m0..7] (k4_scale_min): X = bytes 0-3,8-11,4-7,8-11; positions
    // 4-7 and 12-15 take their high bits from bytes 0-3 / 4-7 (Y).
    const Xmm x = X(s.t), y = X(s.u), tn = X(s.v);
    vmovdqu8(x, W(r, 4));
    vpshufb(y, x, ptr[rip + ctrlY_]);
    vpshufb(x, x, ptr[rip + ctrlX_]);
    vpsrlw(tn, x, 4);
    vpandd(tn, tn, ptr[rip + maskN_]);
    vpandd(x, x, ptr[rip + maskA_]);
    vpsrlw(y, y, 2);
    vpandd(y, y, ptr[rip + c30_]);
    vpternlogd(x, tn, y, 0xFE);  // x | tn | y
    vpmovzxbw(Y(s.sw), x);       // 16 words: sc0..7, m0..7
    vpmaddwd(Y(s.msum), Y(s.sw), ptr[ap + 256]);  // lanes 4..7: min pairs x group sums
    vpxord(s.iacc, s.iacc, s.iacc);
    for (int i = 0; i < 2; ++i) {
      vmovdqu8(s.q, W(r, 16 + 64 * i));
      vpandd(s.lo, s.q, ptr_b[rip + c0F_]);
      vpsrlw(s.hi, s.q, 4);
      vpandd(s.hi, s.hi, ptr_b[rip + c0F_]);
      vpermw(s.t, s.idx[2 * i], s.sw);  // [sc(4i) x16, sc(4i+2) x16]
      vpmaddubsw(s.p, s.lo, ptr[ap + 128 * i]);
      vpdpwssd(s.iacc, s.p, s.t, EvexEncoding);
      vpermw(s.u, s.idx[2 * i + 1], s.sw);  // [sc(4i+1) x16, sc(4i+3) x16]
      vpmaddubsw(s.p, s.hi, ptr[ap + 128 * i + 64]);
      vpdpwssd(s.iacc, s.p, s.u, EvexEncoding);
    }
    // acc += float(isum) * d * d_a - float(sum mins * group sums) * dmin * d_a
    vpbroadcastd(s.f, W(r, 0));         // (d, dmin) fp16 pairs
    vcvtph2ps(s.f, Y(s.f));             // [d, dmin] x8
    vmulps(s.f, s.f, ptr_b[ap + 288]);  // x d_a
    vmovsldup(s.fd, s.f);
    vmovshdup(s.f, s.f);
    vcvtdq2ps(s.iacc, s.iacc);
    vfmadd231ps(acc, s.iacc, s.fd);
    vcvtdq2ps(s.msum, s.msum);  // upper 8 lanes are zero (ymm write)
    vfnmadd231ps(acc, s.msum, s.f);
  }

  // ---------------------------------------------------------------- Q6_K
  // Per row and half h: ql bytes [64] and qh [32] -> levels of elements 128h + 0..63 (qa) and
  // 128h + 64..127 (qb); each zmm of levels covers 4 groups of 16, whose scale words come from
  // one vpermw. The "- 32" of every level: isum -= 32 * sum_g(scale_g * sum16_g).
  struct Q6K {
    Zmm idx[4], sw, ql, qh, qa, qb, t, sa, sb, p, iacc, moff, f;
  };
  Q6K q6k_setup(Pool& pool) {
    Q6K s;
    for (int i = 0; i < 4; ++i) {
      s.idx[i] = pool.take();
      vmovdqu16(s.idx[i], ptr[rip + q6idx_ + 64 * i]);
    }
    for (Zmm* z : {&s.sw, &s.ql, &s.qh, &s.qa, &s.qb, &s.t, &s.sa, &s.sb, &s.p, &s.iacc, &s.moff,
                   &s.f})
      *z = pool.take();
    return s;
  }
  void q6k_row(const Q6K& s, int r, const Zmm& acc) {
    vpmovsxbw(Y(s.sw), W(r, 192));                  // 16 scale words
    vpmaddwd(Y(s.moff), Y(s.sw), ptr[ap + 256]);   // scale x sum16 pairs
    vpxord(s.iacc, s.iacc, s.iacc);
    for (int h = 0; h < 2; ++h) {
      vmovdqu8(s.ql, W(r, 64 * h));
      vmovdqu8(Y(s.qh), W(r, 128 + 32 * h));
      vpsrlw(Y(s.t), Y(s.qh), 2);
      vinserti64x4(s.qh, s.qh, Y(s.t), 1);  // [qh | qh >> 2]
      // qa = low nibbles | bits 0-1 of (qh, qh >> 2) at bits 4-5
      vpandd(s.qa, s.ql, ptr_b[rip + c0F_]);
      vpsllw(s.t, s.qh, 4);
      vpternlogd(s.qa, s.t, ptr_b[rip + c30_], 0xF8);  // qa | (t & 0x30)
      // qb = high nibbles | bits 4-5 of (qh, qh >> 2)
      vpsrlw(s.qb, s.ql, 4);
      vpandd(s.qb, s.qb, ptr_b[rip + c0F_]);
      vpternlogd(s.qb, s.qh, ptr_b[rip + c30_], 0xF8);
      vpermw(s.sa, s.idx[2 * h], s.sw);
      vpmaddubsw(s.p, s.qa, ptr[ap + 128 * h]);
      vpdpwssd(s.iacc, s.p, s.sa, EvexEncoding);
      vpermw(s.sb, s.idx[2 * h + 1], s.sw);
      vpmaddubsw(s.p, s.qb, ptr[ap + 128 * h + 64]);
      vpdpwssd(s.iacc, s.p, s.sb, EvexEncoding);
    }
    vpslld(Y(s.moff), Y(s.moff), 5);
    vpsubd(s.iacc, s.iacc, s.moff);  // upper 8 lanes of moff are zero
    vpbroadcastw(Y(s.f), W(r, 208));
    vcvtph2ps(s.f, Y(s.f));
    vmulps(s.f, s.f, ptr_b[ap + 288]);
    vcvtdq2ps(s.iacc, s.iacc);
    vfmadd231ps(acc, s.iacc, s.f);
  }

  // ---------------------------------------------------------------- Q8_0
  // Rows 2j and 2j+1 share one zmm: lanes 0-7 are row 2j's ggml lanes, 8-15 row 2j+1's, so each
  // lane runs acc = fma(float(isum), d_w * d_a, acc) block after block exactly as ggml's AVX2
  // loop. Weights enter vpdpbusd as w + 128 (unsigned); the activation record carries
  // -128 * (sum of the lane's 4 quants) as the starting value, so every lane is the exact dot.
  void q8_0_pair(Pool& pool, const std::vector<Zmm>& acc, int pairs, bool single) {
    std::vector<Zmm> w(static_cast<size_t>(pairs)), y(w), f(w);
    for (int j = 0; j < pairs; ++j) {
      w[size_t(j)] = pool.take();
      y[size_t(j)] = pool.take();
      f[size_t(j)] = pool.take();
    }
    for (int j = 0; j < pairs; ++j) {
      const int r0 = 2 * j, r1 = single ? 2 * j : 2 * j + 1;
      const Zmm& wj = w[size_t(j)];
      const Zmm& yj = y[size_t(j)];
      const Zmm& fj = f[size_t(j)];
      if (key_.packed && !single) {
        vmovdqu8(wj, W(r0, 2));  // rows r0, r0 + 1 are adjacent: one aligned 64-byte load
      } else {
        vmovdqu8(Y(wj), W(r0, 2));
        vinserti64x4(wj, wj, W(r1, 2), 1);
      }
      vpxord(wj, wj, ptr_b[rip + c80_]);
      vmovdqu32(yj, ptr[ap + 64]);
      vpdpbusd(yj, wj, ptr[ap], EvexEncoding);
      vcvtdq2ps(yj, yj);
      vpbroadcastw(Y(fj), W(r0, 0));
      vpbroadcastw(Y(fj) | k1, W(r1, 0));  // words 8-15: row r1's d
      vcvtph2ps(fj, Y(fj));
      vmulps(fj, fj, ptr_b[dp]);  // d_w * d_a, rounded once as ggml
      vfmadd231ps(acc[size_t(j)], yj, fj);
    }
  }

  // ---------------------------------------------------------------- ymm (AVX2 / AVX-VNNI) units
  // Same arithmetic on 8 lanes with VEX encodings only (ymm0..15): the activation is in natural
  // order, each 32-byte weight load gives two groups (Q4_K) or a quarter of levels (Q6_K), and the
  // group scale words come from a stack broadcast (Q4_K) or an in-lane vpshufb (Q6_K). AVX2 has
  // no vpdpwssd / vpdpbusd: vpmaddwd + vpaddd, and Q8_0 takes ggml's |w| . sign(a, w) route.
  void dot16(const Ymm& acc, const Ymm& p, const Ymm& s) {
    if (key_.isa == Isa::AvxVnni) {
      vpdpwssd(acc, p, s, VexEncoding);
    } else {
      vpmaddwd(p, p, s);
      vpaddd(acc, acc, p);
    }
  }

  void body_narrow(int R) {
    std::vector<Ymm> acc;
    for (int r = 0; r < R; ++r) {
      acc.push_back(Ymm(r));
      vxorps(acc.back(), acc.back(), acc.back());
    }
    int next = R;
    auto take = [&] {
      if (next >= 16) throw_error("jit matvec: out of ymm registers");
      return Ymm(next++);
    };
    g_ = R;
    mov(wp, wrow);
    if (key_.packed && f_.side) mov(sp, srow);
    mov(ap, act);
    Label loop;
    if (key_.type == QuantType::Q8_0) {
      const bool vnni = key_.isa == Isa::AvxVnni;
      const Ymm c = take(), da = take(), a = take(), w = take(), y = take(), f = take();
      vmovdqu(c, ptr[rip + (vnni ? c80_ : ones16_)]);
      lea(dp, ptr[act + int(key_.k / kQK) * kQ8Record]);
      mov(cnt, key_.k / kQK);
      L(loop);
      prefetch_rows(R, 1);
      vbroadcastss(da, ptr[dp]);
      if (!vnni) vmovdqu(a, ptr[ap]);
      for (int r = 0; r < R; ++r) {
        if (vnni) {
          vpxor(w, c, W(r, 2));  // w + 128 as unsigned; the record holds the correction
          vmovdqu(y, ptr[ap + 64]);
          vpdpbusd(y, w, ptr[ap], VexEncoding);
        } else {
          vmovdqu(w, W(r, 2));
          vpabsb(y, w);
          vpsignb(w, a, w);  // the sign of w moved onto the activation
          vpmaddubsw(y, y, w);
          vpmaddwd(y, y, c);
        }
        vcvtdq2ps(y, y);
        vpbroadcastw(f, W(r, 0));
        vcvtph2ps(f, Xmm(f.getIdx()));
        vmulps(f, f, da);
        vfmadd231ps(acc[size_t(r)], y, f);
      }
      next_block(34);
      add(ap, kQ8Record);
      add(dp, 4);
    } else if (key_.type == QuantType::Q4_K) {
      const Ymm sw = take(), q = take(), lo = take(), hi = take(), sc = take(), p = take(),
                iacc = take(), msum = take(), f = take(), fd = take();
      mov(cnt, key_.k / kQK_K);
      L(loop);
      prefetch_rows(R, 3);
      for (int r = 0; r < R; ++r) {
        const Xmm x(q.getIdx()), y(lo.getIdx()), tn(hi.getIdx());
        vmovdqu(x, W(r, 4));
        vpshufb(y, x, ptr[rip + ctrlY_]);
        vpshufb(x, x, ptr[rip + ctrlX_]);
        vpsrlw(tn, x, 4);
        vpand(tn, tn, ptr[rip + maskN_]);
        vpand(x, x, ptr[rip + maskA_]);
        vpsrlw(y, y, 2);
        vpand(y, y, ptr[rip + c30_]);
        vpor(x, x, tn);
        vpor(x, x, y);
        vpmovzxbw(sw, x);  // sc0..7, m0..7
        vmovdqu(ptr[rsp - 64], sw);  // red zone: the kernel calls nothing
        vpmaddwd(msum, sw, ptr[ap + 256]);
        vpxor(iacc, iacc, iacc);
        for (int c = 0; c < 4; ++c) {
          vmovdqu(q, W(r, 16 + 32 * c));
          vpand(lo, q, ptr[rip + c0F_]);
          vpsrlw(hi, q, 4);
          vpand(hi, hi, ptr[rip + c0F_]);
          vpbroadcastw(sc, ptr[rsp - 64 + 4 * c]);  // group 2c
          vpmaddubsw(p, lo, ptr[ap + 64 * c]);
          dot16(iacc, p, sc);
          vpbroadcastw(sc, ptr[rsp - 64 + 4 * c + 2]);  // group 2c + 1
          vpmaddubsw(p, hi, ptr[ap + 64 * c + 32]);
          dot16(iacc, p, sc);
        }
        vpbroadcastd(f, W(r, 0));
        vcvtph2ps(f, Xmm(f.getIdx()));  // [d, dmin] x4
        vbroadcastss(sc, ptr[ap + 288]);
        vmulps(f, f, sc);
        vmovsldup(fd, f);
        vmovshdup(f, f);
        vcvtdq2ps(iacc, iacc);
        vfmadd231ps(acc[size_t(r)], iacc, fd);
        vcvtdq2ps(msum, msum);
        vfnmadd231ps(acc[size_t(r)], msum, f);
      }
      next_block(144);
      add(ap, kKRecord);
    } else {
      const Ymm sw = take(), swd = take(), ql0 = take(), ql1 = take(), qh = take(), q = take(),
                tt = take(), sc = take(), p = take(), iacc = take(), moff = take(), f = take();
      mov(cnt, key_.k / kQK_K);
      L(loop);
      prefetch_rows(R, 4);
      for (int r = 0; r < R; ++r) {
        vpmovsxbw(sw, W(r, 192));  // 16 scale words
        vpmaddwd(moff, sw, ptr[ap + 256]);
        vpxor(iacc, iacc, iacc);
        for (int h = 0; h < 2; ++h) {
          vpermq(swd, sw, h == 0 ? 0x44 : 0xEE);  // the half's 8 words in both lanes
          vmovdqu(ql0, W(r, 64 * h));
          vmovdqu(ql1, W(r, 64 * h + 32));
          vmovdqu(qh, W(r, 128 + 32 * h));
          for (int j = 0; j < 4; ++j) {
            emit_q6k_levels(*this, q, tt, ql0, ql1, qh, j, c0F_, c30_);
            vpshufb(sc, swd, ptr[rip + q6yctrl_ + 32 * j]);  // groups 8h+2j | 8h+2j+1
            vpmaddubsw(p, q, ptr[ap + 128 * h + 32 * j]);
            dot16(iacc, p, sc);
          }
        }
        vpslld(moff, moff, 5);
        vpsubd(iacc, iacc, moff);
        vpbroadcastw(f, W(r, 208));
        vcvtph2ps(f, Xmm(f.getIdx()));
        vbroadcastss(sc, ptr[ap + 288]);
        vmulps(f, f, sc);
        vcvtdq2ps(iacc, iacc);
        vfmadd231ps(acc[size_t(r)], iacc, f);
      }
      next_block(210);
      add(ap, kKRecord);
    }
    dec(cnt);
    jnz(loop, T_NEAR);
    const Ymm t(15);
    for (int r = 0; r < R; ++r) hsum8_store(acc[size_t(r)], t, ptr[out + 4 * r]);
  }

  // ---------------------------------------------------------------- structure
  // ggml's hsum_float_8 of an 8-lane vector y (clobbers y and t), stored at dst.
  void hsum8_store(const Ymm& y, const Ymm& t, const Address& dst) {
    const Xmm x(y.getIdx()), xt(t.getIdx());
    if (wide())
      vextractf32x4(xt, y, 1);
    else
      vextractf128(xt, y, 1);
    vaddps(x, xt, x);
    vmovhlps(xt, xt, x);
    vaddps(x, x, xt);
    vmovshdup(xt, x);
    vaddss(x, x, xt);
    vmovss(dst, x);
  }
  void hsum16_store(const Zmm& z, const Zmm& t, const Address& dst) {
    vextractf64x4(Y(t), z, 1);
    vaddps(Y(z), Y(z), Y(t));
    hsum8_store(Y(z), Y(t), dst);
  }

  // R rows (Q8_0: R / 2 pairs; single: one row in a pair, the other half discarded).
  void body(int R, bool single) {
    if (!wide()) return body_narrow(R);
    Pool pool;
    const bool q8 = key_.type == QuantType::Q8_0;
    const int n_acc = q8 ? (single ? 1 : R / 2) : R;
    std::vector<Zmm> acc(static_cast<size_t>(n_acc));
    for (Zmm& a : acc) {
      a = pool.take();
      vpxord(a, a, a);
    }
    g_ = R;
    mov(wp, wrow);
    if (key_.packed && f_.side) mov(sp, srow);
    mov(ap, act);
    Label loop;
    if (q8) {
      lea(dp, ptr[act + int(key_.k / kQK) * kQ8Record]);
      mov(cnt, key_.k / kQK);
      L(loop);
      prefetch_rows(R, 1);
      q8_0_pair(pool, acc, n_acc, single);
      next_block(34);
      add(ap, kQ8Record);
      add(dp, 4);
    } else if (key_.type == QuantType::Q4_K) {
      const Q4K s = q4k_setup(pool);
      mov(cnt, key_.k / kQK_K);
      L(loop);
      prefetch_rows(R, 3);
      for (int r = 0; r < R; ++r) q4k_row(s, r, acc[size_t(r)]);
      next_block(144);
      add(ap, kKRecord);
    } else {
      const Q6K s = q6k_setup(pool);
      mov(cnt, key_.k / kQK_K);
      L(loop);
      prefetch_rows(R, 4);
      for (int r = 0; r < R; ++r) q6k_row(s, r, acc[size_t(r)]);
      next_block(210);
      add(ap, kKRecord);
    }
    dec(cnt);
    jnz(loop, T_NEAR);
    const Zmm t = pool.take(), t2 = pool.take();
    if (q8) {
      for (int j = 0; j < n_acc; ++j) {
        const Zmm& a = acc[size_t(j)];
        if (!single) {
          vextractf64x4(Y(t2), a, 1);
          hsum8_store(Y(t2), Y(t), ptr[out + 4 * (2 * j + 1)]);
        }
        hsum8_store(Y(a), Y(t), ptr[out + 4 * (2 * j)]);
      }
    } else {
      for (int r = 0; r < R; ++r) hsum16_store(acc[size_t(r)], t, ptr[out + 4 * r]);
    }
  }

  // The next block: GGUF rows step by the block's bytes; packed planes by the group's record.
  void next_block(int block_bytes) {
    if (!key_.packed) return (void)add(wp, block_bytes);
    add(wp, g_ * (f_.hdr + f_.body));
    if (f_.side) add(sp, g_ * f_.side);
  }

  // Software prefetch `lines` cache lines per row, kPrefetch bytes ahead of the current block;
  // packed kernels read one stream: every line of the group's record, kPackedPrefetch bytes ahead
  // (and the side plane as far ahead in blocks), into L2 (prefetcht1): the L2's miss queue keeps
  // more lines in flight from DRAM than the L1's fill buffers do (prefetcht0).
  void prefetch_rows(int R, int lines) {
    if (key_.packed) {
      const int rec = g_ * (f_.hdr + f_.body);
      for (int l = 0; l < (rec + 63) / 64; ++l) prefetcht1(ptr[wp + kPackedPrefetch + 64 * l]);
      if (f_.side) prefetcht1(ptr[sp + kPackedPrefetch / rec * g_ * f_.side]);
      return;
    }
    for (int r = 0; r < R; ++r)
      for (int l = 0; l < lines; ++l) prefetcht0(W(r, kPrefetch + 64 * l));
  }
  // Row streams of the file's layout, 512 bytes ahead: the hardware prefetcher alone leaves the R
  // streams latency-bound (1024 is no better). The packed layout's one stream, 8 KiB ahead: the
  // best of 1..16 KiB. Measurements: docs/perf/cpu.md, "Tuning measurements".
  static constexpr int kPrefetch = 512, kPackedPrefetch = 8192;

  void advance_rows(int R) {
    if (key_.packed) {  // the pass walked the group's planes to the next group's start
      mov(wrow, wp);
      if (f_.side) mov(srow, sp);
      add(out, 4 * R);
      sub(nrows, R);
      return;
    }
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
    for (const Reg64& r : {rbx, rbp, r12, r13, r14, r15}) push(r);
    mov(wrow, ptr[rdi + offsetof(MatvecArgs, w)]);
    mov(stride, ptr[rdi + offsetof(MatvecArgs, w_stride)]);
    mov(nrows, ptr[rdi + offsetof(MatvecArgs, n_rows)]);
    mov(act, ptr[rdi + offsetof(MatvecArgs, act)]);
    mov(out, ptr[rdi + offsetof(MatvecArgs, out)]);
    if (key_.packed) mov(srow, ptr[rdi + offsetof(MatvecArgs, side)]);
    lea(stride3, ptr[stride + stride * 2]);
    if (wide()) {
      mov(r11d, 0xFF00);
      kmovw(k1, r11d);
    }

    Label main_loop, tail_loop, done;
    L(main_loop);
    cmp(nrows, R);
    jl(tail_loop, T_NEAR);
    body(R, false);
    advance_rows(R);
    jmp(main_loop, T_NEAR);
    L(tail_loop);
    if (R > 1) {
      test(nrows, nrows);
      jz(done, T_NEAR);
      body(1, key_.type == QuantType::Q8_0);
      advance_rows(1);
      jmp(tail_loop, T_NEAR);
    }
    L(done);
    vzeroupper();
    for (const Reg64& r : {r15, r14, r13, r12, rbp, rbx}) pop(r);
    ret();
    constants();
  }

  void bytes(Label& l, const uint8_t* b, int n) {
    align(64);
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
    uint8_t ones[32];
    for (int i = 0; i < 32; ++i) ones[i] = i % 2 == 0 ? 1 : 0;
    bytes(ones16_, ones, 32);
    // Q6_K (ymm) quarter j: low lane takes scale word 2j, high lane word 2j + 1 (of a half's 8).
    uint8_t q6y[4 * 32];
    for (int j = 0; j < 4; ++j)
      for (int b = 0; b < 32; ++b) q6y[32 * j + b] = uint8_t(2 * (2 * j + b / 16) + b % 2);
    bytes(q6yctrl_, q6y, 4 * 32);
    const uint8_t cx[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
    bytes(ctrlX_, cx, 16);
    const uint8_t cy[16] = {0x80, 0x80, 0x80, 0x80, 0, 1, 2, 3, 0x80, 0x80, 0x80, 0x80, 4, 5, 6, 7};
    bytes(ctrlY_, cy, 16);
    const uint8_t ma[16] = {0x3F, 0x3F, 0x3F, 0x3F, 0x0F, 0x0F, 0x0F, 0x0F,
                            0x3F, 0x3F, 0x3F, 0x3F, 0,    0,    0,    0};
    bytes(maskA_, ma, 16);
    const uint8_t mn[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0F, 0x0F, 0x0F, 0x0F};
    bytes(maskN_, mn, 16);
    // vpermw indices. Q4_K product 2i+o (o = 0: low nibbles, 1: high): words 0-15 take scale
    // word 4i+o, words 16-31 scale word 4i+2+o. Q6_K product j: word w takes group 4j + w / 8.
    align(64);
    L(q4idx_);
    for (int p = 0; p < 4; ++p)
      for (int w = 0; w < 32; ++w) dw(uint16_t(4 * (p / 2) + (p % 2) + (w < 16 ? 0 : 2)));
    L(q6idx_);
    for (int j = 0; j < 4; ++j)
      for (int w = 0; w < 32; ++w) dw(uint16_t(4 * j + w / 8));
  }
};

}  // namespace

bool matvec_supported(QuantType type, Isa isa, int64_t k) {
  if (k <= 0) return false;
  switch (type) {
    case QuantType::Q4_K:
    case QuantType::Q6_K: return k % kQK_K == 0;
    case QuantType::Q8_0: return k % kQK == 0;
    default: return false;
  }
}

int matvec_rows(QuantType type, Isa isa) {
  // 4 rows per pass: 4 independent dot chains and row streams (AVX-512 Q8_0 takes them in pairs).
  return 4;
}

struct MatvecKernel::Impl {
  explicit Impl(const MatvecKey& key) : gen(key) {}
  Emitter gen;
};

MatvecKernel::MatvecKernel(const MatvecKey& key) : impl_(std::make_unique<Impl>(key)) {
  fn_ = impl_->gen.getCode<MatvecFn>();
}

MatvecKernel::~MatvecKernel() = default;

std::vector<uint8_t> MatvecKernel::code() const {
  const uint8_t* p = impl_->gen.getCode();
  return std::vector<uint8_t>(p, p + impl_->gen.getSize());
}

const MatvecKernel& matvec_kernel(const MatvecKey& key) {
  struct Hash {
    size_t operator()(const MatvecKey& k) const {
      return (((size_t(k.type) * 1000003u ^ size_t(k.k)) * 1000003u ^ size_t(k.rows)) * 31u +
              size_t(k.isa)) * 2u + size_t(k.packed);
    }
  };
  static std::mutex mutex;
  static std::unordered_map<MatvecKey, std::unique_ptr<MatvecKernel>, Hash> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<MatvecKernel>(key);
  return *slot;
}

}  // namespace jitllm::jit
