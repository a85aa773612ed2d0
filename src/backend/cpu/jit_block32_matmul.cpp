// Xbyak emitter of the Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 matmul kernels (jit_formats.h) and the
// activation packing they read.
//
// Packed activation, per token: one record per 32-block, `rec` bytes apart:
//   [0, 32)   int8 quants, bit-identical to quantize_activation's Q8_0 / Q8_1 quants
//   [32, 64)  (formats with a bias) int32 x 8: -bias * (sum of quants 4l..4l+3), lane l
//   then      float d (the fp16 scale as float), and for Q8_1 float s (the fp16 d * sum as float)
// The weight levels are turned into unsigned bytes u = level + bias (Q5_0: q, bias 16; MXFP4:
// table + 12; IQ4_NL: table + 128 with VNNI), so each lane's u8 x s8 dot plus the bias lane is
// the exact signed 4-element dot. Q4_1 / Q5_1 levels are unsigned already (bias 0); their
// min term m * s goes into lane 0. IQ4_NL without VNNI keeps signed levels and moves their sign
// onto the activation (vpsignb), because table + 128 would saturate vpmaddubsw's int16 pairs.
//
// Kernel: for each group of R rows (then single rows), per block and row: unpack the 32 levels
// once, then for each of the T tokens: 8 int32 lanes -> float -> acc[r][t] += lanes * (d_w * d_a)
// (one fused multiply-add per lane, as ggml's AVX2 dots), finally a pairwise horizontal sum.
// VEX on ymm0..15; the avx512 level adds the EVEX vpdpbusd and accumulators in ymm16..31.
#include <xbyak/xbyak.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/jit_formats.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

using namespace Xbyak;
using Q = QuantType;

struct Fmt {
  size_t block;    // weight block bytes
  int d_off;       // fp16 d (MXFP4: E8M0 byte)
  int m_off;       // fp16 m, or -1
  int qh_off;      // 32 high bits, or -1
  int qs_off;      // 16 bytes of nibbles
  int bias;        // u = level + bias
  bool table;      // nibbles index a level table
  bool sign_trick;  // signed levels, sign moved onto the activation (IQ4_NL without VNNI)
  bool q8_1;       // activation has s
};

Fmt fmt_of(QuantType type, Isa isa) {
  switch (type) {
    case Q::Q4_1: return {20, 0, 2, -1, 4, 0, false, false, true};
    case Q::Q5_1: return {24, 0, 2, 4, 8, 0, false, false, true};
    case Q::Q5_0: return {22, 0, -1, 2, 6, 16, false, false, false};
    case Q::MXFP4: return {17, 0, -1, -1, 1, 12, true, false, false};
    case Q::IQ4_NL:
      if (isa == Isa::Avx2) return {18, 0, -1, -1, 2, 0, true, true, false};
      return {18, 0, -1, -1, 2, 128, true, false, false};
    default: throw_error("jit block32 matmul: {} is not a 32-block format", quant_name(type));
  }
}

// Bytes of one block's activation record.
int record_bytes(const Fmt& f) {
  const int b = 32 + (f.bias ? 32 : 0) + 4 + (f.q8_1 ? 4 : 0);
  return (b + 7) / 8 * 8;
}
int corr_off() { return 32; }
int d_rec_off(const Fmt& f) { return 32 + (f.bias ? 32 : 0); }
int s_rec_off(const Fmt& f) { return d_rec_off(f) + 4; }

// 2^(e-128) as MXFP4's doubled-level table needs (ggml's E8M0 half), for every exponent byte.
float e8m0_half(int e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Weight prefetch distance per row stream, in bytes: with R rows read in parallel the hardware
// prefetcher lags; 512 was the best of 0 / 256 / 512 / 1024 (docs/perf/cpu.md, "Tuning
// measurements").
constexpr int kPrefetch = 512;

class Block32Emitter : public CodeGenerator {
 public:
  explicit Block32Emitter(const FmtKey& key)
      : CodeGenerator(8192, AutoGrow),
        key_(key),
        f_(fmt_of(key.type, key.isa)),
        rec_(record_bytes(f_)),
        tok_bytes_(int64_t(block32_act_bytes(key.type, key.isa, key.k))) {
    if (key.k % 32 != 0) throw_error("jit block32 matmul: k {} is not a multiple of 32", key.k);
    if (key.rows < 1 || key.rows > 4 || key.tokens < 1 || key.tokens > 8 ||
        key.rows * key.tokens > (key.isa == Isa::Avx512Vnni ? 16 : 8))
      throw_error("jit block32 matmul: tile {}x{} out of range", key.rows, key.tokens);
    emit();
    ready();
  }

 private:
  const Reg64 wrow = rsi, stride = rdx, stride3 = rcx, nrows = r8, act = r9, out = r10,
              ostride = r11, wp = rax, ap = rbx, cnt = rbp, tmp = r12, e8 = r13, lut = r14;
  // Registers: acc r * T + t in ymm0..7 (ymm16..31 at the avx512 level, EVEX-encoded, which
  // leaves room for 16), the temporaries in ymm8..15.
  const Ymm u{8}, v{9}, dws{10}, m{11}, yi{12}, s{13}, a{14}, t15{15};

  FmtKey key_;
  Fmt f_;
  int rec_;
  bool hoisted_ = false;  // this row group keeps the tokens' d_a broadcast in ymm0..T-1
  int64_t tok_bytes_;
  Label c0F_, c10_, ones16_, qhshuf_, bitsel_, table_, e8lut_;

  bool vnni() const { return key_.isa != Isa::Avx2; }
  bool evex() const { return key_.isa == Isa::Avx512Vnni; }
  Ymm acc(int r, int t) const { return Ymm((evex() ? 16 : 0) + r * key_.tokens + t); }
  Address Wm(int r, int disp) {
    switch (r) {
      case 0: return ptr[wp + disp];
      case 1: return ptr[wp + stride + disp];
      case 2: return ptr[wp + stride * 2 + disp];
      default: return ptr[wp + stride3 + disp];
    }
  }
  Address Am(int t, int disp) { return ptr[ap + int(t * tok_bytes_ + disp)]; }

  void emit() {
    push(rbx);
    push(rbp);
    push(r12);
    push(r13);
    push(r14);
    mov(wrow, ptr[rdi + offsetof(MatArgs, w)]);
    mov(stride, ptr[rdi + offsetof(MatArgs, w_stride)]);
    mov(nrows, ptr[rdi + offsetof(MatArgs, n_rows)]);
    mov(act, ptr[rdi + offsetof(MatArgs, act)]);
    mov(out, ptr[rdi + offsetof(MatArgs, out)]);
    mov(ostride, ptr[rdi + offsetof(MatArgs, out_stride)]);
    lea(stride3, ptr[stride + stride * 2]);
    if (key_.type == Q::MXFP4) lea(lut, ptr[rip + e8lut_]);

    const int R = key_.rows;
    Label group, tail, done;
    if (R > 1) {
      L(group);
      cmp(nrows, R);
      jl(tail, T_NEAR);
      emit_group(R);
      for (int r = 0; r < R; ++r) add(wrow, stride);
      add(out, 4 * R);
      sub(nrows, R);
      jmp(group, T_NEAR);
    }
    L(tail);
    test(nrows, nrows);
    jz(done, T_NEAR);
    emit_group(1);
    add(wrow, stride);
    add(out, 4);
    dec(nrows);
    jmp(tail, T_NEAR);
    L(done);
    vzeroupper();
    pop(r14);
    pop(r13);
    pop(r12);
    pop(rbp);
    pop(rbx);
    ret();
    emit_constants();
  }

  void emit_constants() {
    align(64);
    L(c0F_);
    for (int i = 0; i < 32; ++i) db(0x0F);
    L(c10_);
    for (int i = 0; i < 32; ++i) db(0x10);
    L(ones16_);
    for (int i = 0; i < 16; ++i) dw(1);
    L(qhshuf_);  // byte j <- byte j / 8 of the broadcast qh dword (per 128-bit lane: j % 16)
    for (int j = 0; j < 32; ++j) db(uint8_t(j / 8 % 2 + (j >= 16 ? 2 : 0)));
    L(bitsel_);
    for (int j = 0; j < 32; ++j) db(uint8_t(1u << (j % 8)));
    L(table_);
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < 16; ++i) {
        const int level = key_.type == Q::IQ4_NL ? kValuesIQ4NL[i] : kValuesMXFP4[i];
        db(uint8_t(int8_t(level + f_.bias)));
      }
    if (key_.type == Q::MXFP4) {
      align(64);
      L(e8lut_);
      for (int e = 0; e < 256; ++e) {
        const float x = e8m0_half(e);
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        dd(bits);
      }
    }
  }

  void emit_group(int R) {
    const int T = key_.tokens;
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        if (evex()) vpxord(acc(r, t), acc(r, t), acc(r, t));
        else vxorps(acc(r, t), acc(r, t), acc(r, t));
      }
    mov(wp, wrow);
    mov(ap, act);
    mov(cnt, key_.k / 32);
    if (f_.table) vmovdqu(m, ptr[rip + table_]);
    Label loop;
    L(loop);
    hoisted_ = evex() && R > 1;
    if (hoisted_)  // the tokens' scales once per block, in the free ymm0..7
      for (int t = 0; t < T; ++t) vbroadcastss(Ymm(t), Am(t, d_rec_off(f_)));
    for (int r = 0; r < R; ++r) {
      prefetcht0(Wm(r, kPrefetch));
      unpack(r);
      for (int t = 0; t < T; ++t) token(r, t);
    }
    add(wp, int(f_.block));
    add(ap, rec_);
    dec(cnt);
    jnz(loop, T_NEAR);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        const Xmm x0(s.getIdx()), x1(a.getIdx());
        if (evex()) vextractf32x4(x1, acc(r, t), 1);
        else vextractf128(x1, acc(r, t), 1);
        vaddps(x0, Xmm(acc(r, t).getIdx()), x1);
        vmovhlps(x1, x0, x0);
        vaddps(x0, x0, x1);
        vmovshdup(x1, x0);
        vaddss(x0, x0, x1);
        mov(tmp, out);
        for (int i = 0; i < t; ++i) add(tmp, ostride);
        vmovss(ptr[tmp + 4 * r], x0);
      }
  }

  // Row r's block at wp: levels into u (unsigned, or |level| with the signed levels in v for
  // the sign trick), the scale into dws (8 lanes), the min into m.
  void unpack(int r) {
    const Xmm ux(u.getIdx()), tx(t15.getIdx());
    vmovdqu(ux, Wm(r, f_.qs_off));
    vpsrlw(tx, ux, 4);
    vinserti128(u, u, tx, 1);
    vpand(u, u, ptr[rip + c0F_]);  // byte j < 16: low nibble j; byte 16 + j: high nibble j
    if (f_.qh_off >= 0) {
      vpbroadcastd(t15, Wm(r, f_.qh_off));
      vpshufb(t15, t15, ptr[rip + qhshuf_]);
      vpand(t15, t15, ptr[rip + bitsel_]);
      vpcmpeqb(t15, t15, ptr[rip + bitsel_]);
      vpand(t15, t15, ptr[rip + c10_]);
      vpor(u, u, t15);
    }
    if (f_.table) {  // the table sits in m (table formats have no min)
      if (f_.sign_trick) {
        vpshufb(v, m, u);
        vpabsb(u, v);
      } else {
        vpshufb(u, m, u);
      }
    }
    if (key_.type == Q::MXFP4) {
      movzx(e8.cvt32(), byte_row(r));
      vbroadcastss(dws, ptr[lut + e8 * 4]);
    } else {
      load_half(dws, Wm(r, f_.d_off));
    }
    if (f_.m_off >= 0) load_half(m, Wm(r, f_.m_off));
  }

  Address byte_row(int r) {
    switch (r) {
      case 0: return byte[wp];
      case 1: return byte[wp + stride];
      case 2: return byte[wp + stride * 2];
      default: return byte[wp + stride3];
    }
  }

  void load_half(const Ymm& y, const Address& at) {
    vpbroadcastw(Xmm(y.getIdx()), at);
    vcvtph2ps(y, Xmm(y.getIdx()));
  }

  void token(int r, int t) {
    const Address qa = Am(t, 0);
    if (f_.sign_trick) {
      vmovdqu(a, qa);
      vpsignb(a, a, v);  // a * sign(level)
      vpmaddubsw(yi, u, a);
      vpmaddwd(yi, yi, ptr[rip + ones16_]);
    } else if (vnni()) {
      if (f_.bias) vmovdqu(yi, Am(t, corr_off()));
      else vpxor(yi, yi, yi);
      vpdpbusd(yi, u, qa, key_.isa == Isa::Avx512Vnni ? EvexEncoding : VexEncoding);
    } else {
      vpmaddubsw(yi, u, qa);  // u <= 31 (or 24): pair sums fit int16
      vpmaddwd(yi, yi, ptr[rip + ones16_]);
      if (f_.bias) vpaddd(yi, yi, Am(t, corr_off()));
    }
    vcvtdq2ps(yi, yi);
    if (hoisted_) {
      vmulps(s, Ymm(t), dws);  // d_w * d_a, then one rounding per lane
    } else {
      vbroadcastss(s, Am(t, d_rec_off(f_)));
      vmulps(s, s, dws);
    }
    vfmadd231ps(acc(r, t), yi, s);
    if (f_.q8_1) {
      vmovss(Xmm(s.getIdx()), Am(t, s_rec_off(f_)));  // [s, 0, ..., 0]
      vfmadd231ps(acc(r, t), s, m);
    }
  }
};

// Packs one token (nb blocks of 32 floats) into activation records, as activation_q8_0 /
// activation_q8_1 (ggml-cpu's AVX2 from_float) quantize: quants round(x * (127 / amax)) half to
// even with saturating packs, d = amax / 127 stored through fp16, s = fp16(d * sum of quants);
// then the bias lanes -bias * (sum of quants 4l..4l+3). AVX2 (VEX) at every level.
using PackFn = void (*)(const float* x, uint8_t* dst, int64_t nb);

class PackEmitter : public CodeGenerator {
 public:
  explicit PackEmitter(const Fmt& f) : CodeGenerator(2048), f_(f) {
    const Reg64 x = rdi, dst = rsi, nb = rdx;
    const Ymm v[4] = {ymm0, ymm1, ymm2, ymm3};
    Label loop, done, absmask, c127, perm, ones8, ones16, negbias;
    vmovdqu(ymm8, ptr[rip + perm]);
    vmovdqu(ymm9, ptr[rip + ones8]);
    vmovdqu(ymm10, ptr[rip + ones16]);
    test(nb, nb);
    jz(done, T_NEAR);
    L(loop);
    for (int i = 0; i < 4; ++i) vmovups(v[i], ptr[x + 32 * i]);
    // amax: |x| (sign bit cleared), max over the 32 (max is exact, any order gives the same).
    vandps(ymm4, v[0], ptr[rip + absmask]);
    for (int i = 1; i < 4; ++i) {
      vandps(ymm5, v[i], ptr[rip + absmask]);
      vmaxps(ymm4, ymm4, ymm5);
    }
    vextractf128(xmm5, ymm4, 1);
    vmaxps(xmm4, xmm4, xmm5);
    vmovhlps(xmm5, xmm4, xmm4);
    vmaxps(xmm4, xmm4, xmm5);
    vmovshdup(xmm5, xmm4);
    vmaxss(xmm4, xmm4, xmm5);                // amax
    vdivss(xmm5, xmm4, ptr[rip + c127]);     // d = amax / 127
    vmovss(xmm6, ptr[rip + c127]);
    vdivss(xmm6, xmm6, xmm4);                // 127 / amax
    vxorps(xmm7, xmm7, xmm7);
    vcmpneqss(xmm7, xmm4, xmm7);
    vandps(xmm6, xmm6, xmm7);                // id = 0 where amax == 0
    vbroadcastss(ymm6, xmm6);
    for (int i = 0; i < 4; ++i) {
      vmulps(v[i], v[i], ymm6);
      vcvtps2dq(v[i], v[i]);                 // MXCSR's round to nearest even
    }
    vpackssdw(ymm0, ymm0, ymm1);
    vpackssdw(ymm2, ymm2, ymm3);
    vpacksswb(ymm0, ymm0, ymm2);
    vpermd(ymm0, ymm8, ymm0);               // undo the per-lane interleave of the packs
    vmovdqu(ptr[dst], ymm0);
    // Sums of 4 quants per lane: u8 ones x s8 quants, then pairs of int16.
    vpmaddubsw(ymm1, ymm9, ymm0);
    vpmaddwd(ymm1, ymm1, ymm10);
    if (f_.bias) {
      vpmulld(ymm2, ymm1, ptr[rip + negbias]);
      vmovdqu(ptr[dst + corr_off()], ymm2);
    }
    if (f_.q8_1) {
      vextracti128(xmm2, ymm1, 1);
      vpaddd(xmm1, xmm1, xmm2);
      vpshufd(xmm2, xmm1, 0x4E);
      vpaddd(xmm1, xmm1, xmm2);
      vpshufd(xmm2, xmm1, 0xB1);
      vpaddd(xmm1, xmm1, xmm2);
      vcvtdq2ps(xmm1, xmm1);
      vmulss(xmm1, xmm1, xmm5);              // d (before its fp16 rounding) * sum
      vcvtps2ph(xmm1, xmm1, 0);
      vcvtph2ps(xmm1, xmm1);
      vmovss(ptr[dst + s_rec_off(f_)], xmm1);
    }
    vcvtps2ph(xmm5, xmm5, 0);                // fp16 round trip of d, nearest even
    vcvtph2ps(xmm5, xmm5);
    vmovss(ptr[dst + d_rec_off(f_)], xmm5);
    add(x, 128);
    add(dst, record_bytes(f_));
    dec(nb);
    jnz(loop, T_NEAR);
    L(done);
    vzeroupper();
    ret();
    align(32);
    L(perm);
    for (uint32_t i : {0, 4, 1, 5, 2, 6, 3, 7}) dd(i);
    L(ones8);
    for (int i = 0; i < 32; ++i) db(1);
    L(ones16);
    for (int i = 0; i < 16; ++i) dw(1);
    L(absmask);
    for (int i = 0; i < 8; ++i) dd(0x7FFFFFFF);
    L(c127);
    dd(0x42FE0000);  // 127.0f
    align(32);
    L(negbias);
    for (int i = 0; i < 8; ++i) dd(uint32_t(-f_.bias));
    ready();
  }

 private:
  Fmt f_;
};
}  // namespace

size_t block32_act_bytes(QuantType type, Isa isa, int64_t k) {
  const size_t b = size_t(k / 32) * size_t(record_bytes(fmt_of(type, isa)));
  return (b + 63) / 64 * 64;
}

void block32_pack_activation(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                             uint8_t* dst) {
  // One packer per activation layout: (type, isa) -> Fmt; emitted once, kept for the process.
  static std::mutex mutex;
  static std::unordered_map<uint32_t, std::unique_ptr<PackEmitter>> packers;
  const Fmt f = fmt_of(type, isa);
  PackFn fn;
  {
    std::lock_guard lock(mutex);
    auto& slot = packers[uint32_t(type) * 8 + uint32_t(isa)];
    if (!slot) slot = std::make_unique<PackEmitter>(f);
    fn = slot->getCode<PackFn>();
  }
  const size_t tb = block32_act_bytes(type, isa, k);
  for (int64_t t = 0; t < n; ++t) fn(x + t * k, dst + size_t(t) * tb, k / 32);
}

EmittedCode emit_block32_kernel(const FmtKey& key) {
  auto gen = std::make_shared<Block32Emitter>(key);
  EmittedCode c;
  c.fn = gen->getCode<MatFn>();
  c.bytes.assign(gen->getCode(), gen->getCode() + gen->getSize());
  c.owner = gen;
  return c;
}

}  // namespace jitllm::jit
