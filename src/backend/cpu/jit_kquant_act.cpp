// The packed Q8_K activation of the K-quant kernels (kq_pack_activation, layout in
// jit_kquant_matmul.h), quantized by a generated kernel per k: quantize_q8_k's float operations
// in its order per element (largest |x| first found gives the scale's sign, iscale = -127 / x[j],
// q = min(127, round-half-even(x * iscale)), d = 1 / iscale), so the bytes equal
// quantize_activation's (checked in the tests). ymm0-15 with VEX encodings only: one emission
// serves every ISA level.
#include <xbyak/xbyak.h>

#include <map>
#include <memory>
#include <mutex>

#include "backend/cpu/jit_kquant_matmul.h"
#include "core/error.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

using namespace Xbyak;

// void fn(const float* x /* [n, k] */, uint8_t* dst /* [n, KqActLayout::bytes] */, int64_t n)
using KqPackFn = void (*)(const float*, uint8_t*, int64_t);

class KqActEmitter : public CodeGenerator {
 public:
  explicit KqActEmitter(int64_t k) : CodeGenerator(4096, AutoGrow), k_(k), l_(kq_act_layout(k)) {
    if (k <= 0 || k % kQK_K != 0) throw_error("k-quant activation: k {} is not a multiple of 256", k);
    emit();
    ready();
  }
  KqPackFn fn() const { return getCode<KqPackFn>(); }

 private:
  const Reg64 x = rdi, dst = rsi, n = rdx, xp = r8, qs = r9, dp = r10, s16 = r11, cnt = rcx,
              j = r12;
  int64_t k_;
  KqActLayout l_;
  Label abs_, m127_, one_, i127_;

  // One super-block: xp -> 256 floats; qs, dp, s16 -> its planes.
  void block() {
    const Ymm absmask(15), lim(14), amax(0), t(1), is(2);
    // largest |x|, in every lane (max is exact: the tree's order does not matter)
    for (int i = 0; i < 4; ++i) vandps(Ymm(i), absmask, ptr[xp + 32 * i]);
    for (int i = 4; i < 32; ++i) {
      vandps(Ymm(4), absmask, ptr[xp + 32 * i]);
      vmaxps(Ymm(i % 4), Ymm(i % 4), Ymm(4));
    }
    vmaxps(Ymm(0), Ymm(0), Ymm(1));
    vmaxps(Ymm(2), Ymm(2), Ymm(3));
    vmaxps(amax, Ymm(0), Ymm(2));
    vperm2f128(t, amax, amax, 1);
    vmaxps(amax, amax, t);
    vpermilps(t, amax, 0x4E);
    vmaxps(amax, amax, t);
    vpermilps(t, amax, 0xB1);
    vmaxps(amax, amax, t);

    Label nonzero, find, found, done;
    vxorps(Xmm(1), Xmm(1), Xmm(1));
    vucomiss(Xmm(0), Xmm(1));
    jne(nonzero, T_NEAR);  // zero (or NaN: unordered) -> an all-zero record
    vpxor(t, t, t);
    for (int i = 0; i < 8; ++i) vmovdqu(ptr[qs + 32 * i], t);
    mov(dword[dp], 0);
    vmovdqu(ptr[s16], t);
    jmp(done, T_NEAR);

    L(nonzero);
    xor_(j, j);  // the first element with |x| == amax (it exists: amax is one of them)
    L(find);
    vandps(t, absmask, ptr[xp + j * 4]);
    vcmpeqps(t, t, amax);
    vmovmskps(eax, t);
    test(eax, eax);
    jnz(found);
    add(j, 8);
    jmp(find);
    L(found);
    tzcnt(eax, eax);
    add(j, rax);
    vmovss(Xmm(2), ptr[rip + m127_]);
    vdivss(Xmm(2), Xmm(2), ptr[xp + j * 4]);  // iscale = -127 / x[j]
    vmovss(Xmm(3), ptr[rip + one_]);
    vdivss(Xmm(3), Xmm(3), Xmm(2));           // d = 1 / iscale
    vmovss(ptr[dp], Xmm(3));
    vbroadcastss(is, Xmm(2));
    for (int g = 0; g < 16; ++g) {
      const Ymm a(4), b(5), s(6);
      vmulps(a, is, ptr[xp + 64 * g]);
      vmulps(b, is, ptr[xp + 64 * g + 32]);
      vcvtps2dq(a, a);  // MXCSR default: round half to even
      vcvtps2dq(b, b);
      vpminsd(a, a, lim);
      vpminsd(b, b, lim);
      vpaddd(s, a, b);  // the 16-quant sum
      vextracti128(Xmm(7), s, 1);
      vpaddd(Xmm(6), Xmm(6), Xmm(7));
      vpshufd(Xmm(7), Xmm(6), 0x4E);
      vpaddd(Xmm(6), Xmm(6), Xmm(7));
      vpshufd(Xmm(7), Xmm(6), 0xB1);
      vpaddd(Xmm(6), Xmm(6), Xmm(7));
      vmovd(eax, Xmm(6));
      mov(ptr[s16 + 2 * g], ax);
      vpackssdw(a, a, b);     // [a0-3 b0-3 | a4-7 b4-7]
      vpermq(a, a, 0xD8);     // 16 int16 in order
      vextracti128(Xmm(5), a, 1);
      vpacksswb(Xmm(4), Xmm(4), Xmm(5));
      vmovdqu(ptr[qs + 16 * g], Xmm(4));
    }
    L(done);
  }

  void emit() {
    push(r12);
    vbroadcastss(Ymm(15), ptr[rip + abs_]);
    vpbroadcastd(Ymm(14), ptr[rip + i127_]);
    Label tok, blk, end;
    test(n, n);
    jle(end, T_NEAR);
    L(tok);
    mov(xp, x);
    lea(qs, ptr[dst + int(l_.qs)]);
    lea(dp, ptr[dst + int(l_.d)]);
    lea(s16, ptr[dst + int(l_.s16)]);
    mov(cnt, k_ / kQK_K);
    L(blk);
    block();
    add(xp, 4 * kQK_K);
    add(qs, kQK_K);
    add(dp, 4);
    add(s16, 32);
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
    pop(r12);
    ret();
    auto word = [&](Label& l, uint32_t v) {
      align(4);
      L(l);
      dd(v);
    };
    word(abs_, 0x7fffffffu);
    word(m127_, 0xc2fe0000u);  // -127.0f
    word(one_, 0x3f800000u);   // 1.0f
    word(i127_, 127u);
  }
};

const KqActEmitter& kq_act_kernel(int64_t k) {
  static std::mutex mutex;
  static std::map<int64_t, std::unique_ptr<KqActEmitter>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[k];
  if (!slot) slot = std::make_unique<KqActEmitter>(k);
  return *slot;
}

}  // namespace

void kq_pack_activation(const float* x, int64_t k, int64_t n, uint8_t* dst) {
  if (k <= 0 || k % kQK_K != 0) throw_error("k-quant activation: k {} is not a multiple of 256", k);
  if (n > 0) kq_act_kernel(k).fn()(x, dst, n);
}

}  // namespace jitllm::jit
