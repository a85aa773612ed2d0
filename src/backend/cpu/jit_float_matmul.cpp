// Xbyak emitter of the F16 and BF16 matmul kernels (jit_formats.h) and their activation packing.
//
// Both reproduce the reference matmul (reference_kernels.cpp) bit for bit, so each (row, token)
// keeps ggml's 16-lane accumulators and their reduction order:
//   F16 Vec:  4 accumulators over steps of 64 elements (acc j takes elements 16j..16j+15),
//             acc0 += acc2, acc1 += acc3, acc0 += acc1, lanes reduced pairwise.
//   F16 Gemm: 1 accumulator over steps of 16 (tinyBLAS), lanes reduced pairwise.
//   BF16:     VDPBF16PS steps of 32 elements (lane l adds the product of 2l+1, then of 2l);
//             Vec keeps two accumulators over steps of 64 reduced separately and added in double,
//             Gemm one. Without AVX512_BF16 the step is emulated: the product of two bf16 is exact
//             in f32, so a fused multiply-add per element pair gives the same roundings.
// The 16 logical lanes are one zmm (avx512) or two ymm (lanes 0-7, 8-15). The F16 activation is
// rounded to fp16 and stored back as f32 (exact), so the kernel converts only the weights.
//
// Kernel: for each group of R rows (then single rows): zero R*T accumulator sets, walk k in
// steps, reduce and store out[t][r]. Registers 0..3 are temporaries, accumulators start at 4.
#include <xbyak/xbyak.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/jit_formats.h"
#include "core/error.h"
#include "core/fp16.h"

namespace jitllm::jit {

namespace {

using namespace Xbyak;

enum class Kind { F16, Bf16Native, Bf16Emulated };

Kind kind_of(QuantType type, bool native) {
  if (type == QuantType::F16) return Kind::F16;
  return native ? Kind::Bf16Native : Kind::Bf16Emulated;
}

// Floats per vector register: 16 (zmm) at the avx512 level, 8 (ymm) otherwise.
int lanes_per_reg(Isa isa) { return isa == Isa::Avx512Vnni ? 16 : 8; }

// Bytes of activation per element in the packed layout.
int act_elem_bytes(Kind kind) { return kind == Kind::Bf16Native ? 2 : 4; }

size_t round64(size_t b) { return (b + 63) / 64 * 64; }

// Weight prefetch distance per row stream, in bytes (one prefetch per 64-byte line of a step):
// the shortest that kept the F16 decode rows from waiting (docs/perf/cpu.md, "Tuning measurements").
constexpr int kPrefetch = 1024;

class FloatEmitter : public CodeGenerator {
 public:
  explicit FloatEmitter(const FmtKey& key)
      : CodeGenerator(4096, AutoGrow),
        key_(key),
        kind_(kind_of(key.type, key.bf16_native)),
        wide_(key.isa == Isa::Avx512Vnni),
        W_(lanes_per_reg(key.isa)),
        P_(16 / W_),
        chunk_(key.type == QuantType::F16 ? 16 : 32),
        A_(key.order == FloatOrder::Gemm ? 1 : (key.type == QuantType::F16 ? 4 : 2)),
        step_(A_ * chunk_),
        tok_bytes_(int64_t(float_act_bytes(key.type, key.isa, key.k))) {
    if (key.bf16_native && (key.isa != Isa::Avx512Vnni || !cpu_has_avx512_bf16()))
      throw_error("jit float matmul: VDPBF16PS needs the avx512 level and AVX512_BF16");
    if (key.k % step_ != 0) throw_error("jit float matmul: k {} is not a multiple of {}", key.k, step_);
    if (key.rows < 1 || key.rows > 4 || key.tokens < 1 || key.tokens > 8)
      throw_error("jit float matmul: tile {}x{} out of range", key.rows, key.tokens);
    const int need = 4 + key.rows * key.tokens * A_ * P_;
    if (need > (wide_ ? 32 : 16))
      throw_error("jit float matmul: tile {}x{} needs {} registers", key.rows, key.tokens, need);
    emit();
    ready();
  }

 private:
  const Reg64 wrow = rsi, stride = rdx, stride3 = rcx, nrows = r8, act = r9, out = r10,
              ostride = r11, wp = rax, ap = rbx, cnt = rbp, orow = r12, tmp = r13;

  FmtKey key_;
  Kind kind_;
  bool wide_;
  int W_, P_, chunk_, A_, step_;
  int64_t tok_bytes_;
  Label himask_;

  Xmm V(int i) const { return wide_ ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  int acc_index(int r, int t, int a, int p) const {
    return 4 + ((r * key_.tokens + t) * A_ + a) * P_ + p;
  }
  Address Wm(int r, int disp) {
    switch (r) {
      case 0: return ptr[wp + disp];
      case 1: return ptr[wp + stride + disp];
      case 2: return ptr[wp + stride * 2 + disp];
      default: return ptr[wp + stride3 + disp];
    }
  }
  Address Am(int t, int64_t disp) { return ptr[ap + int(t * tok_bytes_ + disp)]; }

  void emit() {
    push(rbx);
    push(rbp);
    push(r12);
    push(r13);
    mov(wrow, ptr[rdi + offsetof(MatArgs, w)]);
    mov(stride, ptr[rdi + offsetof(MatArgs, w_stride)]);
    mov(nrows, ptr[rdi + offsetof(MatArgs, n_rows)]);
    mov(act, ptr[rdi + offsetof(MatArgs, act)]);
    mov(out, ptr[rdi + offsetof(MatArgs, out)]);
    mov(ostride, ptr[rdi + offsetof(MatArgs, out_stride)]);
    lea(stride3, ptr[stride + stride * 2]);

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
    pop(r13);
    pop(r12);
    pop(rbp);
    pop(rbx);
    ret();

    align(64);
    L(himask_);
    for (int i = 0; i < 16; ++i) dd(0xFFFF0000u);
  }

  void emit_group(int R) {
    const int T = key_.tokens;
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        for (int a = 0; a < A_; ++a)
          for (int p = 0; p < P_; ++p) {
            const Xmm z = V(acc_index(r, t, a, p));
            vxorps(z, z, z);
          }
    mov(wp, wrow);
    mov(ap, act);
    mov(cnt, key_.k / step_);
    Label loop;
    L(loop);
    for (int r = 0; r < R; ++r)
      for (int off = 0; off < step_ * 2; off += 64) prefetcht0(Wm(r, kPrefetch + off));
    int temp = 0;
    for (int a = 0; a < A_; ++a)
      for (int p = 0; p < P_; ++p)
        for (int r = 0; r < R; ++r) {
          step_op(r, a, p, temp);
          temp = (temp + 2) % 4;
        }
    add(wp, step_ * 2);
    add(ap, step_ * act_elem_bytes(kind_));
    dec(cnt);
    jnz(loop, T_NEAR);

    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) reduce_store(r, t);
  }

  // One register's worth of elements of row r (chunk a of the step, part p) into every token.
  void step_op(int r, int a, int p, int temp) {
    const int T = key_.tokens;
    const Xmm w0 = V(temp), w1 = V(temp + 1);
    switch (kind_) {
      case Kind::F16: {
        const int e = a * chunk_ + p * W_;  // first element
        vcvtph2ps(w0, Wm(r, 2 * e));
        for (int t = 0; t < T; ++t) vfmadd231ps(V(acc_index(r, t, a, p)), w0, Am(t, 4 * e));
        break;
      }
      case Kind::Bf16Native: {  // zmm only: 32 elements, 16 lanes
        const int e = a * chunk_;
        vmovdqu16(Zmm(temp), Wm(r, 2 * e));
        for (int t = 0; t < T; ++t) vdpbf16ps(Zmm(acc_index(r, t, a, p)), Zmm(temp), Am(t, 2 * e));
        break;
      }
      case Kind::Bf16Emulated: {
        // W lanes = 2W elements; dword l holds element 2l (low half) and 2l+1 (high half). The
        // packed activation holds [odd W floats][even W floats] for the same elements.
        const int e = a * chunk_ + p * 2 * W_;
        if (wide_) {
          vmovdqu32(Zmm(temp + 1), Wm(r, 2 * e));
          vpandd(Zmm(temp), Zmm(temp + 1), ptr[rip + himask_]);
          vpslld(Zmm(temp + 1), Zmm(temp + 1), 16);
        } else {
          vmovdqu(Ymm(temp + 1), Wm(r, 2 * e));
          vpand(Ymm(temp), Ymm(temp + 1), ptr[rip + himask_]);
          vpslld(Ymm(temp + 1), Ymm(temp + 1), 16);
        }
        for (int t = 0; t < T; ++t) {
          const Xmm acc = V(acc_index(r, t, a, p));
          vfmadd231ps(acc, w0, Am(t, 4 * e));       // odd element first, as VDPBF16PS
          vfmadd231ps(acc, w1, Am(t, 4 * e + 4 * W_));
        }
        break;
      }
    }
  }

  // Sums the 16 logical lanes of accumulator set (r, t, a) into xmm `dst` lane 0, pairwise.
  // Uses registers dst and dst + 1 (both < 4).
  void reduce_lanes(int r, int t, int a, int dst) {
    const Xmm x0(dst), x1(dst + 1);
    if (wide_) {
      vmovaps(Zmm(dst), Zmm(acc_index(r, t, a, 0)));
      vextractf64x4(Ymm(dst + 1), Zmm(dst), 1);
      vaddps(Ymm(dst), Ymm(dst), Ymm(dst + 1));
    } else {
      vaddps(Ymm(dst), Ymm(acc_index(r, t, a, 0)), Ymm(acc_index(r, t, a, 1)));
    }
    vextractf128(x1, Ymm(dst), 1);
    vaddps(x0, x0, x1);
    vmovhlps(x1, x0, x0);
    vaddps(x0, x0, x1);
    vmovshdup(x1, x0);
    vaddss(x0, x0, x1);
  }

  void reduce_store(int r, int t) {
    if (key_.type == QuantType::F16 && A_ == 4) {
      for (int p = 0; p < P_; ++p) {
        const Xmm a0 = V(acc_index(r, t, 0, p)), a1 = V(acc_index(r, t, 1, p)),
                  a2 = V(acc_index(r, t, 2, p)), a3 = V(acc_index(r, t, 3, p));
        vaddps(a0, a0, a2);
        vaddps(a1, a1, a3);
        vaddps(a0, a0, a1);
      }
      reduce_lanes(r, t, 0, 0);
    } else if (A_ == 2) {  // BF16 Vec: two sums added in double
      reduce_lanes(r, t, 0, 0);
      reduce_lanes(r, t, 1, 2);
      vcvtss2sd(Xmm(0), Xmm(0), Xmm(0));
      vcvtss2sd(Xmm(2), Xmm(2), Xmm(2));
      vaddsd(Xmm(0), Xmm(0), Xmm(2));
      vcvtsd2ss(Xmm(0), Xmm(0), Xmm(0));
    } else {
      reduce_lanes(r, t, 0, 0);
    }
    mov(tmp, out);
    for (int i = 0; i < t; ++i) add(tmp, ostride);
    vmovss(ptr[tmp + 4 * r], Xmm(0));
  }
};

// Packs one token's activation (k floats) for a float kernel:
//   F16:           fp16 rounding (vcvtps2ph, nearest even, as ggml's F16C from_float), back to f32
//   BF16 native:   bf16 bits (f32_to_bf16: nearest even, NaN kept quiet), as VDPBF16PS reads them
//   BF16 emulated: per 2W elements the W odd then the W even elements, bf16-rounded, as f32
// The bf16 rounding is integer work on the bits: (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000,
// NaN -> (b & 0xffff0000) | 0x00400000. AVX2 (VEX) except the zmm emulated layout.
using PackFn = void (*)(const float* x, uint8_t* dst, int64_t k);

class PackEmitter : public CodeGenerator {
 public:
  PackEmitter(Kind kind, int W) : CodeGenerator(2048), kind_(kind), zmm_(W == 16) {
    const Reg64 x = rdi, dst = rsi, k = rdx;
    Label loop, done;
    if (kind_ != Kind::F16) load_constants();
    test(k, k);
    jz(done, T_NEAR);
    L(loop);
    switch (kind_) {
      case Kind::F16:
        for (int i = 0; i < 2; ++i) {
          vmovups(ymm0, ptr[x + 32 * i]);
          vcvtps2ph(xmm0, ymm0, 0);  // imm 0: round to nearest even
          vcvtph2ps(ymm0, xmm0);
          vmovups(ptr[dst + 32 * i], ymm0);
        }
        add(dst, 64);
        sub(k, 16);
        break;
      case Kind::Bf16Native:
        round_bf16(ymm0, ptr[x]);
        round_bf16(ymm1, ptr[x + 32]);
        vpsrld(ymm0, ymm0, 16);
        vpsrld(ymm1, ymm1, 16);
        vpackusdw(ymm0, ymm0, ymm1);  // per 128-bit lane: 4 of ymm0, 4 of ymm1
        vpermq(ymm0, ymm0, 0xD8);
        vmovdqu(ptr[dst], ymm0);
        add(dst, 32);
        sub(k, 16);
        break;
      case Kind::Bf16Emulated:
        if (zmm_) {
          round_bf16_zmm(zmm0, ptr[x]);
          round_bf16_zmm(zmm1, ptr[x + 64]);
          vmovaps(zmm2, zmm14);  // odd indices
          vpermi2ps(zmm2, zmm0, zmm1);
          vmovaps(zmm3, zmm15);  // even indices
          vpermi2ps(zmm3, zmm0, zmm1);
          vmovups(ptr[dst], zmm2);
          vmovups(ptr[dst + 64], zmm3);
          add(dst, 128);
          sub(k, 32);
        } else {
          round_bf16(ymm0, ptr[x]);
          round_bf16(ymm1, ptr[x + 32]);
          vshufps(ymm2, ymm0, ymm1, 0xDD);  // odd elements, 128-bit lanes interleaved
          vpermpd(ymm2, ymm2, 0xD8);
          vshufps(ymm3, ymm0, ymm1, 0x88);  // even elements
          vpermpd(ymm3, ymm3, 0xD8);
          vmovups(ptr[dst], ymm2);
          vmovups(ptr[dst + 32], ymm3);
          add(dst, 64);
          sub(k, 16);
        }
        break;
    }
    add(x, kind_ == Kind::Bf16Emulated && zmm_ ? 128 : 64);
    test(k, k);
    jnz(loop, T_NEAR);
    L(done);
    vzeroupper();
    ret();
    align(64);
    L(c_);
    for (uint32_t v : {0x1u, 0x7FFFu, 0xFFFF0000u, 0x00400000u})
      for (int i = 0; i < 16; ++i) dd(v);
    L(idx_);
    for (int i = 0; i < 16; ++i) dd(uint32_t(2 * i + 1));
    for (int i = 0; i < 16; ++i) dd(uint32_t(2 * i));
    ready();
  }

 private:
  Kind kind_;
  bool zmm_;
  Label c_, idx_;

  // ymm10..13 (zmm10..13) = 1, 0x7fff, 0xffff0000, 0x00400000 in every lane; zmm14/15 = indices.
  void load_constants() {
    for (int i = 0; i < 4; ++i) {
      if (zmm_) vmovups(Zmm(10 + i), ptr[rip + c_ + 64 * i]);
      else vmovups(Ymm(10 + i), ptr[rip + c_ + 64 * i]);
    }
    if (zmm_) {
      vmovups(zmm14, ptr[rip + idx_]);
      vmovups(zmm15, ptr[rip + idx_ + 64]);
    }
  }

  void round_bf16(const Ymm& r, const Address& src) {
    vmovups(ymm4, src);
    vpsrld(ymm5, ymm4, 16);
    vpand(ymm5, ymm5, ymm10);
    vpaddd(ymm5, ymm5, ymm11);
    vpaddd(ymm5, ymm5, ymm4);
    vpand(r, ymm5, ymm12);
    vpand(ymm6, ymm4, ymm12);  // NaN: high half with the quiet bit
    vpor(ymm6, ymm6, ymm13);
    vcmpunordps(ymm7, ymm4, ymm4);
    vblendvps(r, r, ymm6, ymm7);
  }

  void round_bf16_zmm(const Zmm& r, const Address& src) {
    vmovups(zmm4, src);
    vpsrld(zmm5, zmm4, 16);
    vpandd(zmm5, zmm5, zmm10);
    vpaddd(zmm5, zmm5, zmm11);
    vpaddd(zmm5, zmm5, zmm4);
    vpandd(r, zmm5, zmm12);
    vpandd(zmm6, zmm4, zmm12);
    vpord(zmm6, zmm6, zmm13);
    vcmpps(k1, zmm4, zmm4, 3);  // unordered: NaN
    vmovaps(r | k1, zmm6);
  }
};

}  // namespace

size_t float_act_bytes(QuantType type, Isa isa, int64_t k) {
  return round64(size_t(k) * size_t(act_elem_bytes(kind_of(type, bf16_native(isa)))));
}

void float_pack_activation(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                           uint8_t* dst) {
  const Kind kind = kind_of(type, bf16_native(isa));
  const int W = lanes_per_reg(isa);
  if (k % (kind == Kind::Bf16Emulated ? 2 * W : 16) != 0)
    throw_error("jit float matmul: activation of {} elements is not packable", k);
  // One packer per layout, emitted once and kept for the process.
  static std::mutex mutex;
  static std::unordered_map<int, std::unique_ptr<PackEmitter>> packers;
  PackFn fn;
  {
    std::lock_guard lock(mutex);
    auto& slot = packers[int(kind) * 2 + (W == 16 ? 1 : 0)];
    if (!slot) slot = std::make_unique<PackEmitter>(kind, W);
    fn = slot->getCode<PackFn>();
  }
  const size_t tb = float_act_bytes(type, isa, k);
  for (int64_t t = 0; t < n; ++t) fn(x + t * k, dst + size_t(t) * tb, k);
}

EmittedCode emit_float_kernel(const FmtKey& key) {
  if (key.type != QuantType::F16 && key.type != QuantType::BF16)
    throw_error("jit float matmul: {} is not a float format", quant_name(key.type));
  auto gen = std::make_shared<FloatEmitter>(key);
  EmittedCode c;
  c.fn = gen->getCode<MatFn>();
  c.bytes.assign(gen->getCode(), gen->getCode() + gen->getSize());
  c.owner = gen;
  return c;
}

}  // namespace jitllm::jit
