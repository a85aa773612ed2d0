// Xbyak emitter of the Q2_K / Q3_K / Q5_K matmul kernels declared in jit_kquant_matmul.h, on
// AVX2 (ymm, vpmaddwd), AVX-VNNI (ymm, VEX vpdpwssd) and AVX-512 VNNI (zmm: 64 weights per
// instruction, all 32 registers), and the tile shapes per format and ISA.
//
// Kernel structure (loop counts and activation offsets are constants of the emission):
//   for each group of R rows (then the tail one row at a time):
//     float acc[r][t] = 0
//     for each super-block:  for each row r:
//       16 int16 sub-group scales S and offset coefficients M from the block's packed scales;
//       the 8 scales of a 128-bit lane are broadcast to every lane (tables lo/hi), so one
//       vpshufb per chunk gives each int16 position its sub-group's scale
//       int32 isum[t] = (Q3_K: M . bsums[t]; else 0)
//       for each chunk of V weights (V = 32 ymm / 64 zmm): unpack to u8 once, then per token
//         isum[t] += scale16 . (u8 weights x s8 quants)        (vpmaddubsw, vpdpwssd)
//       acc[r][t] += float(isum[t]) * (d * d_act)   (Q2_K/Q5_K: - float(M . bsums) * dmin * d_act)
//     horizontal sums -> out[t][r]
// zmm Q3_K / Q5_K decode the packed scales of the R rows together (one row per 128-bit lane).
// zmm Q2_K instead maps (level, sub-group) -> level * scale with one vpshufb table per row and
// super-block, so a token costs one vpdpbusd per 64 weights (unit_q2_k_wide).
// Register budgets are checked at emission (throws on overflow).
#include <xbyak/xbyak.h>

#include <cstring>

#include "backend/cpu/jit_kquant_matmul.h"
#include "core/error.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

using namespace Xbyak;

// Byte offsets inside the blocks (quant/formats.h).
struct Fields {
  int bytes, d, dmin;
};
Fields fields(QuantType t) {
  switch (t) {
    case QuantType::Q2_K: return {int(sizeof(BlockQ2_K)), 80, 82};
    case QuantType::Q3_K: return {int(sizeof(BlockQ3_K)), 108, -1};
    case QuantType::Q5_K: return {int(sizeof(BlockQ5_K)), 0, 2};
    default: throw_error("jit k-quant matmul: no emitter for {}", quant_name(t));
  }
}

constexpr int kPrefetchBytes = 6144;  // decode: prefetch distance ahead of each row's block

class KqEmitter : public CodeGenerator {
 public:
  explicit KqEmitter(const KqKey& key)
      : CodeGenerator(4096, AutoGrow), key_(key), f_(fields(key.type)), al_(kq_act_layout(key.k)) {
    if (key.rows < 1 || key.rows > 4 || key.tokens < 1 || key.tokens > 8)
      throw_error("jit k-quant matmul: tile {}x{} out of range", key.rows, key.tokens);
    if (key.k <= 0 || key.k % kQK_K != 0)
      throw_error("jit k-quant matmul: k {} is not a multiple of 256", key.k);
    emit();
    ready();
  }

 private:
  const Reg64 wrow = rsi, stride = rdx, stride3 = rcx, nrows = r8, act = r9, out = r10,
              ostride = r11, wp = rax, ap = rbx, dp = rbp, s16p = r12, cnt = r14, tmp = r15;

  KqKey key_;
  Fields f_;
  KqActLayout al_;
  Label c03_, c04_, c0F_, c10_, c20_, c30_, neg4_, ones16_, sh3_, ctrlX_, ctrlY_, maskA_, maskN_,
      dupLo_, dupHi_, chunkCtrl_, bitTest_, shiftW2_, shiftW4_, ctrlH3_, q2TblCtrl_, q2Odd_, q2Two_, q2Idx_;
  uint32_t used_ = 0;

  bool wide() const { return key_.isa == Isa::Avx512Vnni; }
  int V() const { return wide() ? 64 : 32; }  // weights per chunk
  int P() const { return int(al_.bytes); }

  // ---------------------------------------------------------------- registers
  // Accumulators take registers from the top (`high`), scratch from the bottom, so the xmm
  // scratch of the scale unpacking stays in 0..15 (VEX-only instructions such as vpand).
  int take(bool high = false) {
    const int n = wide() ? 32 : 16;
    for (int j = 0; j < n; ++j) {
      const int i = high ? n - 1 - j : j;
      if (!(used_ & (1u << i))) {
        used_ |= 1u << i;
        return i;
      }
    }
    throw_error("jit k-quant matmul: tile {}x{} needs more than {} vector registers", key_.rows,
                key_.tokens, n);
  }
  void give(int i) { used_ &= ~(1u << i); }
  // A full-width vector (zmm when wide, else ymm), the ymm and the xmm of register i.
  Xmm vec(int i) const { return wide() ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  static Ymm ymm(int i) { return Ymm(i); }
  static Xmm xmm(int i) { return Xmm(i); }

  // Width-neutral logic ops: EVEX needs the d/q forms (also for registers 16..31).
  void vand(const Xmm& d, const Xmm& a, const Operand& b) {
    if (wide()) vpandd(d, a, b); else vpand(d, a, b);
  }
  void vor(const Xmm& d, const Xmm& a, const Operand& b) {
    if (wide()) vpord(d, a, b); else vpor(d, a, b);
  }
  void vzero(const Xmm& d) {
    if (wide()) vpxord(d, d, d); else vpxor(d, d, d);
  }
  void vload(const Xmm& d, const Address& a) {
    if (wide()) vmovdqu8(d, a); else vmovdqu(d, a);
  }
  // Constant as a memory operand of the vector's width (constants are 64 bytes long).
  Address C(const Label& l) { return ptr[rip + l]; }

  Address W(int r, int disp) {
    switch (r) {
      case 0: return ptr[wp + disp];
      case 1: return ptr[wp + stride + disp];
      case 2: return ptr[wp + stride * 2 + disp];
      default: return ptr[wp + stride3 + disp];
    }
  }
  Address A(int t, int disp) { return ptr[ap + t * P() + disp]; }

  // Moves bit `from` of every byte to bit `to` (other bits are garbage; callers mask). Word
  // shifts are exact here: a byte's bit `to` comes from its own bit `from` while from <= 7.
  void move_bit(const Xmm& d, const Xmm& s, int from, int to) {
    if (from > to) vpsrlw(d, s, uint8_t(from - to));
    else if (from < to) vpsllw(d, s, uint8_t(to - from));
    else if (wide()) vmovdqa64(d, s);
    else vmovdqa(d, s);
  }

  // fp16 at `a` broadcast to every float lane.
  void load_half(int i, const Address& a) {
    if (wide()) {
      vpbroadcastw(ymm(i), a);  // 16 halves -> 16 floats
      vcvtph2ps(Zmm(i), ymm(i));
    } else {
      vpbroadcastw(xmm(i), a);
      vcvtph2ps(ymm(i), xmm(i));
    }
  }

  // ---------------------------------------------------------------- scales
  // 16 int16 sub-group scales -> ymm S; 16 int16 offset coefficients -> ymm M. X is scratch.
  void scales_q2_k(int r, int S, int M, int X) {
    vmovdqu(xmm(X), W(r, 0));
    vpand(xmm(S), xmm(X), C(c0F_));
    vpmovzxbw(ymm(S), xmm(S));
    vpsrlw(xmm(X), xmm(X), 4);
    vpand(xmm(X), xmm(X), C(c0F_));
    vpmovzxbw(ymm(M), xmm(X));  // mins
  }
  void scales_q3_k(int r, int S, int M, int X) {
    // low 4 bits: bytes 0..7 (scales 0..7) and their high nibbles (8..15); high 2 bits: byte
    // 8 + j % 4 >> 2 * (j / 4), i.e. dword lane j / 4 of (bytes 8..11 x4) >> (0, 2, 4, 6).
    vmovq(xmm(X), W(r, 96));
    vpsrlw(xmm(S), xmm(X), 4);
    vpunpcklqdq(xmm(X), xmm(X), xmm(S));
    vpand(xmm(X), xmm(X), C(c0F_));
    vmovd(xmm(S), W(r, 104));
    vpshufd(xmm(S), xmm(S), 0);
    vpsrlvd(xmm(S), xmm(S), C(sh3_));
    vpand(xmm(S), xmm(S), C(c03_));
    vpsllw(xmm(S), xmm(S), 4);
    vpor(xmm(X), xmm(X), xmm(S));
    vpsubb(xmm(X), xmm(X), C(c20_));  // stored scales are offset by 32
    vpmovsxbw(ymm(S), xmm(X));
    vpmullw(ymm(M), ymm(S), C(neg4_));  // levels are q - 4: -4 * scale * bsum
  }
  void scales_q5_k(int r, int S, int M, int X) {
    // 12 packed bytes -> [sc0..7, m0..7] (k4_scale_min): X = bytes 0-3,8-11,4-7,8-11; positions
    // 4-7 / 12-15 take their high bits from bytes 0-3 / 4-7 (shuffled into S first).
    vmovdqu(xmm(X), W(r, 4));
    vpshufb(xmm(S), xmm(X), C(ctrlY_));
    vpshufb(xmm(X), xmm(X), C(ctrlX_));
    vpsrlw(xmm(M), xmm(X), 4);
    vpand(xmm(M), xmm(M), C(maskN_));
    vpand(xmm(X), xmm(X), C(maskA_));
    vpor(xmm(X), xmm(X), xmm(M));
    vpsrlw(xmm(S), xmm(S), 2);
    vpand(xmm(S), xmm(S), C(c30_));
    vpor(xmm(X), xmm(X), xmm(S));
    // per 32-element group -> per 16-element sub-group (each value twice)
    vpshufb(xmm(S), xmm(X), C(dupLo_));
    vpshufb(xmm(M), xmm(X), C(dupHi_));
    vpmovzxbw(ymm(S), xmm(S));
    vpmovzxbw(ymm(M), xmm(M));
  }

  // zmm, Q3_K / Q5_K: the packed scales of all R rows decoded at once, one row per 128-bit lane;
  // S01/M01 hold rows 0-1 as int16 (row r in lanes 2r, 2r + 1), S23/M23 rows 2-3 (R > 2 only).
  // X, Y, Z: scratch.
  struct RowScales {
    int S01 = -1, S23 = -1, M01 = -1, M23 = -1;
  };
  void batch_scales(int R, const RowScales& rs, int X, int Y, int Z) {
    const Zmm x(X), y(Y), z(Z);
    const bool q3 = key_.type == QuantType::Q3_K;
    const int off = q3 ? 94 : 4;  // 16 bytes ending inside the block (Q3_K: 2 bytes of hmask/qs first)
    vmovdqu(Xmm(X), W(0, off));
    for (int r = 1; r < R; ++r) vinserti32x4(x, x, W(r, off), uint8_t(r));
    if (q3) {
      // as scales_q3_k, with the packed byte j at lane byte j + 2
      vpsrldq(y, x, 2);
      vpsrlw(z, y, 4);
      vpunpcklqdq(y, y, z);
      vpandd(y, y, C(c0F_));
      vpshufb(x, x, C(ctrlH3_));
      vpsrlvd(x, x, C(sh3_));
      vpandd(x, x, C(c03_));
      vpsllw(x, x, 4);
      vpord(y, y, x);
      vpsubb(y, y, C(c20_));
      vpmovsxbw(Zmm(rs.S01), Ymm(Y));
      vpmullw(Zmm(rs.M01), Zmm(rs.S01), C(neg4_));
      if (R > 2) {
        vextracti64x4(Ymm(Z), y, 1);
        vpmovsxbw(Zmm(rs.S23), Ymm(Z));
        vpmullw(Zmm(rs.M23), Zmm(rs.S23), C(neg4_));
      }
      return;
    }
    // as scales_q5_k
    vpshufb(y, x, C(ctrlY_));
    vpshufb(x, x, C(ctrlX_));
    vpsrlw(z, x, 4);
    vpandd(z, z, C(maskN_));
    vpandd(x, x, C(maskA_));
    vpord(x, x, z);
    vpsrlw(y, y, 2);
    vpandd(y, y, C(c30_));
    vpord(x, x, y);
    vpshufb(y, x, C(dupLo_));
    vpshufb(x, x, C(dupHi_));
    vpmovzxbw(Zmm(rs.S01), Ymm(Y));
    vpmovzxbw(Zmm(rs.M01), Ymm(X));
    if (R > 2) {
      vextracti64x4(Ymm(Z), y, 1);
      vpmovzxbw(Zmm(rs.S23), Ymm(Z));
      vextracti64x4(Ymm(Z), x, 1);
      vpmovzxbw(Zmm(rs.M23), Ymm(Z));
    }
  }

  // ---------------------------------------------------------------- weights
  // Registers holding a row's super-block bytes between chunks.
  struct RowRegs {
    int ql = -1, qh = -1;
  };

  // Chunk c of the super-block as unsigned levels in q (t2: scratch).
  void unpack(int r, int c, const RowRegs& rr, int q, int t2) {
    const Xmm Q = vec(q), T2 = vec(t2), L = vec(rr.ql), H = rr.qh >= 0 ? vec(rr.qh) : Xmm();
    switch (key_.type) {
      case QuantType::Q2_K:
      case QuantType::Q3_K: {
        const int qs = key_.type == QuantType::Q2_K ? 16 : 32;
        // ymm chunk c: elements 32c.. = bits 2j..2j+1 of qs[32h + l], h = c / 4, j = c % 4.
        // zmm chunk c: [qs | qs >> 2] of half h = c / 2, shifted by 4p (p = c % 2).
        const int per_load = wide() ? 2 : 4;
        const int h = c / per_load, s = wide() ? 4 * (c % 2) : 2 * (c % 4);
        if (c % per_load == 0) {
          if (wide()) {
            vbroadcasti64x4(Zmm(rr.ql), W(r, qs + 32 * h));
            vpsrlvw(Zmm(rr.ql), Zmm(rr.ql), C(shiftW2_));  // [qs | qs >> 2]
          } else {
            vmovdqu(ymm(rr.ql), W(r, qs + 32 * h));
          }
        }
        if (s) {
          vpsrlw(Q, L, uint8_t(s));
          vand(Q, Q, C(c03_));
        } else {
          vand(Q, L, C(c03_));
        }
        if (key_.type == QuantType::Q3_K) {
          // bit 2 of the level: bit (4h + j) of hmask[l]; zmm: [hm | hm] tested against bits
          // (4h + 2p | 4h + 2p + 1), the two chunks j = 2p, 2p + 1, and 4 added where set.
          if (wide()) {
            vptestmb(k1, Zmm(rr.qh), ptr[rip + bitTest_ + 64 * (2 * h + c % 2)]);
            vpaddb(Zmm(q) | k1, Zmm(q), C(c04_));
          } else {
            move_bit(T2, H, 4 * h + c % 4, 2);
            vand(T2, T2, C(c04_));
            vor(Q, Q, T2);
          }
        }
        break;
      }
      case QuantType::Q5_K: {
        // ymm chunk c: nibble c % 2 of qs[32 (c / 2) + l] | bit c of qh[l] at bit 4.
        // zmm chunk c: [low | high nibbles of qs[32c..]] | bits 2c / 2c + 1 of qh.
        if (wide()) {
          vbroadcasti64x4(Zmm(rr.ql), W(r, 48 + 32 * c));
          vpsrlvw(Zmm(rr.ql), Zmm(rr.ql), C(shiftW4_));  // [qs | qs >> 4]
          vand(Q, L, C(c0F_));
          vptestmb(k1, Zmm(rr.qh), ptr[rip + bitTest_ + 64 * c]);  // bits 2c | 2c + 1 of qh
          vpaddb(Zmm(q) | k1, Zmm(q), C(c10_));
          break;
        } else {
          if (c % 2 == 0) {
            vmovdqu(ymm(rr.ql), W(r, 48 + 16 * c));
            vand(Q, L, C(c0F_));
          } else {
            vpsrlw(Q, L, 4);
            vand(Q, Q, C(c0F_));
          }
          move_bit(T2, H, c, 4);
        }
        vand(T2, T2, C(c10_));
        vor(Q, Q, T2);
        break;
      }
      default: break;
    }
  }

  // Per super-block, once per row: the high-bit plane (Q3_K hmask, Q5_K qh), twice for zmm.
  void load_high_bits(int r, int qh, int) {
    const int off = key_.type == QuantType::Q3_K ? 0 : 16;
    if (wide()) {
      vbroadcasti64x4(Zmm(qh), W(r, off));
    } else {
      vmovdqu(ymm(qh), W(r, off));
    }
  }

  // ---------------------------------------------------------------- Q2_K, zmm
  // Q2_K's level x 4-bit scale is at most 45, so the scaled weight fits an unsigned byte: one
  // vpshufb table per row and super-block maps (level, sub-group) to level * scale, and each token
  // then costs one vpdpbusd per 64 weights (the GEMM's inner loop halves). Table lane L holds
  // sub-groups L, L + 4, L + 8, L + 12 (chunk c = 0..3) at bytes 4c + level.
  void unit_q2_k_wide(int R, const std::vector<std::vector<int>>& acc) {
    const int T = key_.tokens;
    std::vector<int> iacc(size_t(T), 0);
    for (int& i : iacc) i = take(true);
    const int tbl = take(), x = take(), t1 = take(), q = take(), ql = take(), m3 = take();
    const Zmm Z(tbl), X(x), T1(t1), Q(q), QL(ql), M3(m3);
    vmovdqu32(M3, C(c03_));
    if (T == 1)
      for (int r = 0; r < R; ++r)
        for (int l = 0; l < (f_.bytes + 63) / 64; ++l) prefetcht0(W(r, kPrefetchBytes + 64 * l));
    for (int r = 0; r < R; ++r) {
      vbroadcasti32x4(X, W(r, 0));  // the 16 scale bytes in every lane
      // acc -= float(mins . bsums) * (dmin * d_act)
      vpsrlw(Xmm(t1), Xmm(x), 4);
      vpand(Xmm(t1), Xmm(t1), C(c0F_));
      vpmovzxbw(Ymm(t1), Xmm(t1));
      load_half(q, W(r, f_.dmin));
      for (int t = 0; t < T; ++t) {
        vpmaddwd(Ymm(ql), Ymm(t1), ptr[s16p + t * P()]);  // upper lanes zeroed
        vcvtdq2ps(QL, QL);
        vbroadcastss(Z, ptr[dp + t * P()]);
        vmulps(Z, Z, Q);
        vfnmadd231ps(Zmm(acc[size_t(r)][size_t(t)]), QL, Z);
        vpxord(Zmm(iacc[size_t(t)]), Zmm(iacc[size_t(t)]), Zmm(iacc[size_t(t)]));
      }
      // table: s = scale of the byte's sub-group; level * s = (level & 1) s + (level & 2) s
      vpshufb(X, X, C(q2TblCtrl_));
      vpandd(X, X, C(c0F_));
      vpandd(T1, X, C(q2Odd_));
      vpaddb(X, X, X);
      vpandd(X, X, C(q2Two_));
      vpaddb(Z, X, T1);
      for (int c = 0; c < 4; ++c) {
        const int h = c / 2, sh = 4 * (c % 2);
        if (c % 2 == 0) {
          vbroadcasti64x4(QL, W(r, 16 + 32 * h));
          vpsrlvw(QL, QL, C(shiftW2_));  // [qs | qs >> 2]
        }
        if (sh) vpsrlw(Q, QL, uint8_t(sh));
        else vmovdqa64(Q, QL);
        vpternlogd(Q, M3, ptr[rip + q2Idx_ + 64 * c], 0xEA);  // (level & 3) | 4c
        vpshufb(Q, Z, Q);
        for (int t = 0; t < T; ++t)
          vpdpbusd(Zmm(iacc[size_t(t)]), Q, A(t, 64 * c), EvexEncoding);
      }
      // acc += float(isum) * (d * d_act)
      load_half(q, W(r, f_.d));
      for (int t = 0; t < T; ++t) {
        vbroadcastss(Z, ptr[dp + t * P()]);
        vmulps(Z, Z, Q);
        vcvtdq2ps(Zmm(iacc[size_t(t)]), Zmm(iacc[size_t(t)]));
        vfmadd231ps(Zmm(acc[size_t(r)][size_t(t)]), Zmm(iacc[size_t(t)]), Z);
      }
    }
    for (int i : {tbl, x, t1, q, ql, m3}) give(i);
    for (int i : iacc) give(i);
  }

  // ---------------------------------------------------------------- one super-block
  void unit(int R, const std::vector<std::vector<int>>& acc) {
    if (wide() && key_.type == QuantType::Q2_K) return unit_q2_k_wide(R, acc);
    const int T = key_.tokens;
    const bool has_min = key_.type != QuantType::Q3_K;
    std::vector<int> iacc(size_t(T), 0);
    for (int& i : iacc) i = take(true);
    const int tlo = take(), thi = take(), q = take(), t2 = take(), sc = take(), prod = take();
    RowRegs rr;
    rr.ql = take();
    if (key_.type != QuantType::Q2_K) rr.qh = take();
    const int n_chunks = kQK_K / V();
    const bool batched = wide() && key_.type != QuantType::Q2_K;
    RowScales rs;
    if (batched) {
      rs.S01 = take();
      rs.M01 = take();
      if (R > 2) {
        rs.S23 = take();
        rs.M23 = take();
      }
      batch_scales(R, rs, q, t2, prod);
    }
    if (T == 1) {
      // Decode streams the weights once, so it prefetches far ahead (less than half the time of no
      // prefetch: docs/perf/cpu.md, "Tuning measurements"); the GEMM re-reads each 16-row chunk
      // from L1 instead.
      for (int r = 0; r < R; ++r)
        for (int l = 0; l < (f_.bytes + 63) / 64; ++l) prefetcht0(W(r, kPrefetchBytes + 64 * l));
    }
    for (int r = 0; r < R; ++r) {
      // S in tlo's ymm, M in sc's ymm (scratch: q); batched: tables straight from S01/S23.
      if (batched) {
        const int Sz = r < 2 ? rs.S01 : rs.S23, Mz = r < 2 ? rs.M01 : rs.M23;
        if (r % 2 == 0) {
          vmovdqa(ymm(sc), ymm(Mz));
        } else {
          vextracti64x4(ymm(sc), Zmm(Mz), 1);
        }
        // lanes 2(r % 2) / 2(r % 2) + 1 -> every lane
        vshufi32x4(Zmm(thi), Zmm(Sz), Zmm(Sz), r % 2 ? 0xFF : 0x55);
        vshufi32x4(Zmm(tlo), Zmm(Sz), Zmm(Sz), r % 2 ? 0xAA : 0x00);
      } else {
        switch (key_.type) {
          case QuantType::Q2_K: scales_q2_k(r, tlo, sc, q); break;
          case QuantType::Q3_K: scales_q3_k(r, tlo, sc, q); break;
          default: scales_q5_k(r, tlo, sc, q); break;
        }
      }
      if (has_min) {
        // acc -= float(M . bsums) * (dmin * d_act)
        load_half(q, W(r, f_.dmin));
        for (int t = 0; t < T; ++t) {
          vpmaddwd(ymm(prod), ymm(sc), ptr[s16p + t * P()]);  // upper zmm lanes zeroed
          vcvtdq2ps(vec(prod), vec(prod));
          vbroadcastss(vec(t2), ptr[dp + t * P()]);
          vmulps(vec(t2), vec(t2), vec(q));
          vfnmadd231ps(vec(acc[size_t(r)][size_t(t)]), vec(prod), vec(t2));
        }
      } else {
        for (int t = 0; t < T; ++t)
          vpmaddwd(ymm(iacc[size_t(t)]), ymm(sc), ptr[s16p + t * P()]);
      }
      // scale tables: sub-groups 0..7 / 8..15 in every 128-bit lane
      if (batched) {
      } else if (wide()) {
        vshufi32x4(Zmm(thi), Zmm(tlo), Zmm(tlo), 0x55);
        vshufi32x4(Zmm(tlo), Zmm(tlo), Zmm(tlo), 0x00);
      } else {
        vpermq(ymm(thi), ymm(tlo), 0xEE);
        vpermq(ymm(tlo), ymm(tlo), 0x44);
      }
      if (rr.qh >= 0) load_high_bits(r, rr.qh, t2);
      for (int c = 0; c < n_chunks; ++c) {
        unpack(r, c, rr, q, t2);
        // chunk c covers sub-groups (V / 16) c .. (V / 16) (c + 1) - 1, all in one table
        const bool lo = c < n_chunks / 2;
        vpshufb(vec(sc), vec(lo ? tlo : thi), ptr[rip + chunkCtrl_ + 64 * c]);
        for (int t = 0; t < T; ++t) {
          const Xmm ia = vec(iacc[size_t(t)]), pr = vec(prod);
          vpmaddubsw(pr, vec(q), A(t, V() * c));
          if (has_min && c == 0) {
            vpmaddwd(ia, pr, vec(sc));  // the first chunk starts the sum (no zeroing)
          } else if (key_.isa == Isa::Avx2) {
            vpmaddwd(pr, pr, vec(sc));
            vpaddd(ia, ia, pr);
          } else {
            vpdpwssd(ia, pr, vec(sc), wide() ? EvexEncoding : VexEncoding);
          }
        }
      }
      // acc += float(isum) * (d * d_act)
      load_half(q, W(r, f_.d));
      for (int t = 0; t < T; ++t) {
        vbroadcastss(vec(t2), ptr[dp + t * P()]);
        vmulps(vec(t2), vec(t2), vec(q));
        vcvtdq2ps(vec(iacc[size_t(t)]), vec(iacc[size_t(t)]));
        vfmadd231ps(vec(acc[size_t(r)][size_t(t)]), vec(iacc[size_t(t)]), vec(t2));
      }
    }
    for (int i : {rs.S01, rs.S23, rs.M01, rs.M23})
      if (i >= 0) give(i);
    for (int i : {tlo, thi, q, t2, sc, prod, rr.ql}) give(i);
    if (rr.qh >= 0) give(rr.qh);
    for (int i : iacc) give(i);
  }

  // ---------------------------------------------------------------- structure
  void hsum_store(int y, const Address& dst) {
    const int t = take();
    const Xmm x(y), xt(t);
    if (wide()) {
      vextractf64x4(ymm(t), Zmm(y), 1);
      vaddps(ymm(y), ymm(y), ymm(t));
    }
    if (wide()) vextractf32x4(xt, ymm(y), 1);
    else vextractf128(xt, ymm(y), 1);
    vaddps(x, x, xt);
    vmovhlps(xt, xt, x);
    vaddps(x, x, xt);
    vmovshdup(xt, x);
    vaddss(x, x, xt);
    vmovss(dst, x);
    give(t);
  }

  void body(int R) {
    const int T = key_.tokens;
    std::vector<std::vector<int>> acc(static_cast<size_t>(R), std::vector<int>(static_cast<size_t>(T)));
    for (auto& row : acc)
      for (int& a : row) {
        a = take(true);
        vzero(vec(a));
      }
    mov(wp, wrow);
    lea(ap, ptr[act + int(al_.qs)]);
    lea(dp, ptr[act + int(al_.d)]);
    lea(s16p, ptr[act + int(al_.s16)]);
    mov(cnt, key_.k / kQK_K);
    Label loop;
    L(loop);
    unit(R, acc);
    add(wp, f_.bytes);
    add(ap, kQK_K);
    add(dp, 4);
    add(s16p, 32);
    dec(cnt);
    jnz(loop, T_NEAR);
    mov(tmp, out);
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) hsum_store(acc[size_t(r)][size_t(t)], ptr[tmp + 4 * r]);
      if (t + 1 < T) add(tmp, ostride);
    }
    for (auto& row : acc)
      for (int a : row) give(a);
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
    for (const Reg64& r : {rbx, rbp, r12, r13, r14, r15}) push(r);
    mov(wrow, ptr[rdi + offsetof(KqArgs, w)]);
    mov(stride, ptr[rdi + offsetof(KqArgs, w_stride)]);
    mov(nrows, ptr[rdi + offsetof(KqArgs, n_rows)]);
    mov(act, ptr[rdi + offsetof(KqArgs, act)]);
    mov(out, ptr[rdi + offsetof(KqArgs, out)]);
    mov(ostride, ptr[rdi + offsetof(KqArgs, out_stride)]);
    lea(stride3, ptr[stride + stride * 2]);

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
    for (const Reg64& r : {r15, r14, r13, r12, rbp, rbx}) pop(r);
    ret();
    constants();
  }

  // ---------------------------------------------------------------- constants (64 bytes each)
  void bytes64(Label& l, const uint8_t* b) {
    align(64);
    L(l);
    for (int i = 0; i < 64; ++i) db(b[i]);
  }
  void splat(Label& l, uint8_t v) {
    uint8_t b[64];
    std::memset(b, v, 64);
    bytes64(l, b);
  }
  void lane16(Label& l, const uint8_t (&b)[16]) {  // 16 bytes repeated in every 128-bit lane
    uint8_t x[64];
    for (int i = 0; i < 64; ++i) x[i] = b[i % 16];
    bytes64(l, x);
  }

  void constants() {
    splat(c03_, 0x03);
    splat(c04_, 0x04);
    splat(c0F_, 0x0F);
    splat(c10_, 0x10);
    splat(c20_, 0x20);
    splat(c30_, 0x30);
    uint8_t b[64];
    for (int i = 0; i < 64; ++i) b[i] = i % 2 == 0 ? 0xFC : 0xFF;  // int16 -4
    bytes64(neg4_, b);
    for (int i = 0; i < 64; ++i) b[i] = i % 4 == 0 ? uint8_t(2 * ((i / 4) % 4)) : 0;  // dwords 0,2,4,6
    bytes64(sh3_, b);
    lane16(ctrlX_, {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11});
    lane16(ctrlY_, {0x80, 0x80, 0x80, 0x80, 0, 1, 2, 3, 0x80, 0x80, 0x80, 0x80, 4, 5, 6, 7});
    lane16(maskA_, {0x3F, 0x3F, 0x3F, 0x3F, 0x0F, 0x0F, 0x0F, 0x0F, 0x3F, 0x3F, 0x3F, 0x3F, 0, 0,
                    0, 0});
    lane16(maskN_, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0F, 0x0F, 0x0F, 0x0F});
    lane16(ctrlH3_, {10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13});
    lane16(dupLo_, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7});
    lane16(dupHi_, {8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15});
    // vpsrlvw counts: words 0..15 by 0, 16..31 by 2 (or 4)
    for (int i = 0; i < 64; ++i) b[i] = i % 2 == 0 && i >= 32 ? 2 : 0;
    bytes64(shiftW2_, b);
    for (int i = 0; i < 64; ++i) b[i] = i % 2 == 0 && i >= 32 ? 4 : 0;
    bytes64(shiftW4_, b);
    // Q2_K zmm table: lane L, byte 4j + level <- scale byte L + 4j; level masks; chunk index 4c
    for (int i = 0; i < 64; ++i) b[i] = uint8_t(i / 16 + 4 * ((i % 16) / 4));
    bytes64(q2TblCtrl_, b);
    for (int i = 0; i < 64; ++i) b[i] = i % 2 ? 0xFF : 0;
    bytes64(q2Odd_, b);
    for (int i = 0; i < 64; ++i) b[i] = i % 4 >= 2 ? 0xFF : 0;
    bytes64(q2Two_, b);
    align(64);
    L(q2Idx_);
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 64; ++i) db(uint8_t(4 * c));
    // vptestmb masks: entry i = [1 << 2i in the low 32 bytes | 1 << (2i + 1) in the high 32].
    align(64);
    L(bitTest_);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 64; ++j) db(uint8_t(1u << (2 * i + j / 32)));
    // Per chunk: 128-bit lane L holds sub-group g = (V / 16) c + L; its int16 scale is word
    // g % 8 of the (lo or hi) table, replicated over the lane.
    const int per = V() / 16;
    for (int c = 0; c < kQK_K / V(); ++c) {
      for (int i = 0; i < 64; ++i) {
        const int g = (per * c + (i / 16) % per) % 8;
        b[i] = uint8_t(2 * g + i % 2);
      }
      if (c == 0) {
        align(64);
        L(chunkCtrl_);
      }
      for (int i = 0; i < 64; ++i) db(b[i]);
    }
  }
};

}  // namespace

struct KqKernel::Impl {
  explicit Impl(const KqKey& key) : gen(key) {}
  KqEmitter gen;
};

KqKernel::KqKernel(const KqKey& key) : key_(key), impl_(std::make_unique<Impl>(key)) {
  fn_ = impl_->gen.getCode<KqFn>();
}

KqKernel::~KqKernel() = default;

std::vector<uint8_t> KqKernel::code() const {
  const uint8_t* p = impl_->gen.getCode();
  return std::vector<uint8_t>(p, p + impl_->gen.getSize());
}

KqTile kq_decode_tile(QuantType, Isa) { return {4, 1}; }

KqTile kq_gemm_tile(QuantType type, Isa isa) {
  if (type == QuantType::Q2_K && isa == Isa::Avx512Vnni) return {2, 8};  // 1 op per token
  return isa == Isa::Avx512Vnni ? KqTile{2, 6} : KqTile{1, 4};  // ymm: 16 registers
}

}  // namespace jitllm::jit
