// Packed activations for the generated matmuls: an Xbyak kernel per (packing, k) that re-does
// the reference activation quantization (quantize_activation: ggml's Q8_0 from_float, Q8_K) with
// the same float operations in the same order per element, so the same bytes (checked against
// the reference in the tests), and lays them out as planes the matmul kernels address with
// constant offsets: quants, float scales, per-32 int32 values, per-16 int16 sums.
// The kernel uses ymm0-15 with VEX encodings only, so one emission serves every ISA level.
#include <xbyak/xbyak.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/cpu/jit_matmul.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm::jit {

namespace {

size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

bool is_k_format(QuantType t) {
  return t == QuantType::Q2_K || t == QuantType::Q3_K || t == QuantType::Q4_K ||
         t == QuantType::Q5_K || t == QuantType::Q6_K;
}

// The constant folded into each 32-block's integer sum: weights stored with an offset (Q4_0's
// q - 8) contribute offset * sum(activation quants), subtracted here.
int bias_mul(QuantType type, Isa) {
  switch (type) {
    case QuantType::Q4_0: return 8;
    case QuantType::Q8_0: return 0;  // |w| . sign(a, w): no offset
    default: return 0;
  }
}

using namespace Xbyak;

// void fn(const float* x /* [n, k] */, uint8_t* dst /* [n, ActLayout::bytes] */, int64_t n)
using PackFn = void (*)(const float*, uint8_t*, int64_t);

class ActEmitter : public CodeGenerator {
 public:
  ActEmitter(bool kq, int64_t k, int mul, const ActLayout& l)
      : CodeGenerator(4096, AutoGrow), kq_(kq), k_(k), mul_(mul), l_(l),
        s32_(l.s32 != ActLayout::kNoPlane) {
    emit();
    ready();
  }
  PackFn fn() const { return getCode<PackFn>(); }

 private:
  const Reg64 x = rdi, dst = rsi, n = rdx, xp = r8, qs = r9, dp = r10, s32 = r11, s16 = r12,
              cnt = rcx, j = r13, sum2 = r14;
  bool kq_;
  int64_t k_;
  int mul_;
  ActLayout l_;
  bool s32_;  // the layout has the per-32 plane
  Label abs_, f127_, fm127_, f1_, i127_, im128_;

  // Largest |x| of n8 ymm loads from xp into xm (broadcast in every lane; max is exact, so the
  // order of the tree does not matter).
  void amax(int n8, const Ymm& m, const Ymm& absmask, const Ymm& t) {
    vxorps(m, m, m);
    for (int i = 0; i < n8; ++i) {
      vandps(t, absmask, ptr[xp + 32 * i]);
      vmaxps(m, m, t);
    }
    const Xmm xm(m.getIdx()), xt(t.getIdx());
    vextractf128(xt, m, 1);
    vmaxps(xm, xm, xt);
    vmovhlps(xt, xt, xm);
    vmaxps(xm, xm, xt);
    vmovshdup(xt, xm);
    vmaxss(xm, xm, xt);
    vbroadcastss(m, xm);
  }

  // Sum of the 8 int32 lanes of v into a 32-bit register (v is clobbered).
  void hsum_epi32(const Ymm& v, const Ymm& t, const Reg32& r) {
    const Xmm xv(v.getIdx()), xt(t.getIdx());
    vextracti128(xt, v, 1);
    vpaddd(xv, xv, xt);
    vpshufd(xt, xv, 0x4E);
    vpaddd(xv, xv, xt);
    vpshufd(xt, xv, 0xB1);
    vpaddd(xv, xv, xt);
    vmovd(r, xv);
  }

  // 8 int32 lanes (already in int8 range) -> 8 int8 at dst.
  void store8(const Address& a, const Ymm& q, const Ymm& t) {
    const Xmm xq(q.getIdx()), xt(t.getIdx());
    vextracti128(xt, q, 1);
    vpackssdw(xq, xq, xt);
    vpacksswb(xq, xq, xq);
    vmovq(a, xq);
  }

  // ggml's AVX Q8_0 from_float: d = fp16(amax / 127), q = round-half-even(x * (127 / amax)),
  // clamped to [-128, 127]; s32 = -mul * sum(q).
  void block_q8_0() {
    const Ymm absmask(15), m(14), t(13), id(12), sum(11), lim_hi(10), lim_lo(9);
    amax(4, m, absmask, t);
    const Xmm xm(m.getIdx()), xd(t.getIdx()), xid(id.getIdx()), xz(sum.getIdx());
    vdivss(xd, xm, ptr[rip + f127_]);
    vcvtps2ph(xd, xd, 0);  // round to nearest even, as f32_to_fp16
    vcvtph2ps(xd, xd);
    vmovss(ptr[dp], xd);
    vmovss(xid, ptr[rip + f127_]);
    vdivss(xid, xid, xm);
    vxorps(xz, xz, xz);
    vcmpneqss(xd, xm, xz);  // amax != 0 ? 127 / amax : 0
    vandps(xid, xid, xd);
    vbroadcastss(id, xid);
    vpxor(sum, sum, sum);
    for (int i = 0; i < 4; ++i) {
      const Ymm q(i);
      vmulps(q, id, ptr[xp + 32 * i]);
      vcvtps2dq(q, q);  // MXCSR default: round half to even
      vpminsd(q, q, lim_hi);
      vpmaxsd(q, q, lim_lo);
      vpaddd(sum, sum, q);
      store8(ptr[qs + 8 * i], q, t);
    }
    hsum_epi32(sum, t, eax);
    imul(eax, eax, -mul_);
    mov(ptr[s32], eax);
  }

  // quantize_q8_k: the first element with the largest |x| gives the sign of the scale,
  // iscale = -127 / x[j], q = min(127, round-half-even(x * iscale)), d = 1 / iscale,
  // s16 = sums of 16, s32 = s16[2g] + s16[2g + 1].
  void block_q8_k() {
    const Ymm absmask(15), m(14), t(13), is(12), lim_hi(10);
    Label nonzero, find, found, done;
    amax(32, m, absmask, t);
    const Xmm xm(m.getIdx()), xt(t.getIdx()), xis(is.getIdx());
    vxorps(xt, xt, xt);
    vucomiss(xm, xt);
    jne(nonzero, T_NEAR);
    vpxor(t, t, t);
    for (int i = 0; i < 8; ++i) vmovdqu(ptr[qs + 32 * i], t);
    mov(dword[dp], 0);
    if (s32_) vmovdqu(ptr[s32], t);
    vmovdqu(ptr[s16], t);
    jmp(done, T_NEAR);
    L(nonzero);
    xor_(j, j);
    L(find);
    vandps(t, absmask, ptr[xp + j * 4]);
    vcmpeqps(t, t, m);
    vmovmskps(eax, t);
    test(eax, eax);
    jnz(found);
    add(j, 8);
    jmp(find);
    L(found);
    tzcnt(eax, eax);
    add(j, rax);
    vmovss(xis, ptr[rip + fm127_]);
    vdivss(xis, xis, ptr[xp + j * 4]);
    vmovss(xt, ptr[rip + f1_]);
    vdivss(xt, xt, xis);
    vmovss(ptr[dp], xt);
    vbroadcastss(is, xis);
    for (int g = 0; g < 16; ++g) {
      const Ymm q0(0), q1(1);
      vmulps(q0, is, ptr[xp + 64 * g]);
      vmulps(q1, is, ptr[xp + 64 * g + 32]);
      vcvtps2dq(q0, q0);
      vcvtps2dq(q1, q1);
      vpminsd(q0, q0, lim_hi);
      vpminsd(q1, q1, lim_hi);
      const Ymm qsum(2);
      vpaddd(qsum, q0, q1);
      store8(ptr[qs + 16 * g], q0, t);  // (store8 clobbers its source)
      store8(ptr[qs + 16 * g + 8], q1, t);
      hsum_epi32(qsum, t, eax);
      mov(ptr[s16 + 2 * g], ax);
      if (!s32_) continue;
      if (g % 2 == 0) {
        mov(sum2.cvt32(), eax);
      } else {
        add(sum2.cvt32(), eax);
        mov(ptr[s32 + 4 * (g / 2)], sum2.cvt32());
      }
    }
    L(done);
  }

  void emit() {
    const int unit = kq_ ? kQK_K : kQK;
    if (k_ <= 0 || k_ % unit != 0)
      throw_error("jit activation: k {} is not a multiple of {}", k_, unit);
    for (const Reg64& r : {r12, r13, r14}) push(r);
    vbroadcastss(Ymm(15), ptr[rip + abs_]);
    vpbroadcastd(Ymm(10), ptr[rip + i127_]);
    vpbroadcastd(Ymm(9), ptr[rip + im128_]);
    Label tok, blk, end;
    test(n, n);
    jle(end, T_NEAR);
    L(tok);
    mov(xp, x);
    lea(qs, ptr[dst + int(l_.qs)]);
    lea(dp, ptr[dst + int(l_.d)]);
    if (s32_) lea(s32, ptr[dst + int(l_.s32)]);
    lea(s16, ptr[dst + int(l_.s16)]);
    mov(cnt, k_ / unit);
    L(blk);
    if (kq_) {
      block_q8_k();
      add(xp, 4 * kQK_K);
      add(qs, kQK_K);
      add(dp, 4);
      if (s32_) add(s32, 32);
      add(s16, 32);
    } else {
      block_q8_0();
      add(xp, 4 * kQK);
      add(qs, kQK);
      add(dp, 4);
      add(s32, 4);
    }
    dec(cnt);
    jnz(blk, T_NEAR);
    mov(rax, 4 * k_);
    add(x, rax);
    mov(rax, int64_t(l_.bytes));
    add(dst, rax);
    dec(n);
    jnz(tok, T_NEAR);
    L(end);
    vzeroupper();
    for (const Reg64& r : {r14, r13, r12}) pop(r);
    ret();
    auto word = [&](Label& l, uint32_t v) {
      align(4);
      L(l);
      dd(v);
    };
    word(abs_, 0x7fffffffu);
    word(f127_, 0x42fe0000u);   // 127.0f
    word(fm127_, 0xc2fe0000u);  // -127.0f
    word(f1_, 0x3f800000u);     // 1.0f
    word(i127_, 127u);
    word(im128_, uint32_t(-128));
  }
};

// One kernel per (Q8_K or Q8_0 packing, k, bias); emitted on first use, kept for the process.
const ActEmitter& act_kernel(QuantType weight_type, Isa isa, int64_t k) {
  static std::mutex mu;
  static std::map<std::tuple<bool, int64_t, int>, std::unique_ptr<ActEmitter>> cache;
  const bool kq = is_k_format(weight_type);
  const int mul = kq ? 0 : bias_mul(weight_type, isa);
  std::lock_guard<std::mutex> lock(mu);
  auto& e = cache[{kq, k, mul}];
  if (!e) e = std::make_unique<ActEmitter>(kq, k, mul, act_layout(weight_type, k));
  return *e;
}

// One Q8_K kernel per layout other than act_layout's (the K-quant kernels' records).
const ActEmitter& q8k_kernel(const ActLayout& l) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, size_t, size_t, size_t, size_t, size_t>,
                  std::unique_ptr<ActEmitter>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& e = cache[{l.k, l.qs, l.d, l.s32, l.s16, l.bytes}];
  if (!e) e = std::make_unique<ActEmitter>(true, l.k, 0, l);
  return *e;
}

}  // namespace

bool jit_matmul_supported(QuantType type) {
  return type == QuantType::Q8_0 || type == QuantType::Q4_0 || type == QuantType::Q4_K ||
         type == QuantType::Q6_K;
}

ActLayout act_layout(QuantType weight_type, int64_t k) {
  ActLayout l;
  l.k = k;
  const bool kq = is_k_format(weight_type);
  const int64_t nd = kq ? k / kQK_K : k / kQK;
  l.qs = 0;
  l.d = pad64(size_t(k));
  l.s32 = l.d + pad64(size_t(nd) * 4);
  l.s16 = l.s32 + pad64(size_t(k / 32) * 4);
  l.bytes = l.s16 + (kq ? pad64(size_t(k / 16) * 2) : 0);
  return l;
}

void pack_activation(QuantType weight_type, Isa isa, const float* x, int64_t k, int64_t n,
                     uint8_t* dst) {
  if (n > 0) act_kernel(weight_type, isa, k).fn()(x, dst, n);
}

void pack_q8k_activation(const ActLayout& l, const float* x, int64_t n, uint8_t* dst) {
  if (n > 0) q8k_kernel(l).fn()(x, dst, n);
}

std::vector<uint8_t> act_kernel_code(QuantType weight_type, Isa isa, int64_t k) {
  // A fresh emission (not the cached kernel), so two calls compare two emissions.
  const bool kq = is_k_format(weight_type);
  const ActEmitter e(kq, k, kq ? 0 : bias_mul(weight_type, isa), act_layout(weight_type, k));
  return std::vector<uint8_t>(e.getCode(), e.getCode() + e.getSize());
}

void pack_activation_reference(QuantType weight_type, Isa isa, const float* x, int64_t k,
                               int64_t n, uint8_t* dst) {
  const ActLayout l = act_layout(weight_type, k);
  const bool kq = is_k_format(weight_type);
  const QuantType act_type = quant_traits(weight_type).vec_dot_type;
  std::vector<uint8_t> blocks(row_bytes(act_type, k));
  const int mul = bias_mul(weight_type, isa);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* p = dst + size_t(t) * l.bytes;
    auto* qs = reinterpret_cast<int8_t*>(p + l.qs);
    auto* d = reinterpret_cast<float*>(p + l.d);
    auto* s32 = reinterpret_cast<int32_t*>(p + l.s32);
    quantize_activation(weight_type, x + t * k, blocks.data(), k);
    if (kq) {
      const auto* b = reinterpret_cast<const BlockQ8_K*>(blocks.data());
      auto* s16 = reinterpret_cast<int16_t*>(p + l.s16);
      for (int64_t i = 0; i < k / kQK_K; ++i) {
        std::memcpy(qs + i * kQK_K, b[i].qs, kQK_K);
        d[i] = b[i].d;
        std::memcpy(s16 + i * 16, b[i].bsums, sizeof(b[i].bsums));
        for (int g = 0; g < 8; ++g) s32[i * 8 + g] = b[i].bsums[2 * g] + b[i].bsums[2 * g + 1];
      }
    } else {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blocks.data());
      for (int64_t i = 0; i < k / kQK; ++i) {
        std::memcpy(qs + i * kQK, b[i].qs, kQK);
        d[i] = fp16_to_f32(b[i].d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) sum += b[i].qs[j];
        s32[i] = -mul * sum;
      }
    }
  }
}

}  // namespace jitllm::jit
