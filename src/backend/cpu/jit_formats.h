// Generated matmul kernels (decode matvec and prefill GEMM tiles) for the weight formats that
// jit_matmul.h does not cover: the float formats F16 and BF16 (jit_float_matmul.cpp) and the
// 32-element block formats Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (jit_block32_matmul.cpp), with the
// dispatch that JitKernels::matmul calls first (jit_formats_dispatch.cpp).
//
// Numerics:
// - F16 / BF16 reproduce the reference matmul bit for bit: the activation is rounded to the weight
//   format, and the sums follow ggml's orders (ggml_vec_dot_f16 for one token or when tinyBLAS
//   does not apply, tinyBLAS for several; VDPBF16PS's pair order for BF16, emulated with exact
//   products and two fused adds where the CPU lacks AVX512_BF16).
// - Block formats: the activation is quantized exactly as quantize_activation does (Q8_0, or Q8_1
//   for Q4_1/Q5_1), every 4-element partial dot is an exact integer, and the float accumulation
//   is per lane (8 lanes of 4 elements, one fused multiply-add per block, as ggml's AVX2 dots)
//   instead of the reference's one float per block: ~1e-7 relative per block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/jit_cpu_features.h"
#include "backend/cpu/jit_matmul.h"  // MatArgs, MatFn
#include "quant/types.h"

namespace jitllm::jit {

// Runs out[n, rows] = x[n, k] . W[rows, k]^T with generated kernels when `type` is one of this
// file's formats and the shape suits them; returns false (nothing written) otherwise, and the
// caller falls back. Uses ThreadPool::global(); rows are split in 16-row-aligned chunks.
bool matmul_other_formats(Isa isa, QuantType type, const uint8_t* weights, int64_t rows,
                          int64_t k, const float* x, int64_t n, float* out);

// Whether this file has kernels for `type`.
bool other_format_supported(QuantType type);

// The CPU has AVX512_BF16 (VDPBF16PS).
bool cpu_has_avx512_bf16();
// Whether BF16 kernels at `isa` use VDPBF16PS (avx512 level, CPU support, not disabled) or the
// exact emulation. Tests disable it to run the emulation at the avx512 level too.
bool bf16_native(Isa isa);
void set_bf16_native_enabled(bool enabled);

// Summation order of a float kernel: ggml_vec_dot (one activation row) or tinyBLAS (several).
enum class FloatOrder { Vec, Gemm };

struct FmtKey {
  QuantType type;
  int64_t k;
  int rows;    // R: weight rows per pass
  int tokens;  // T: activation rows per pass
  Isa isa;
  FloatOrder order;  // float formats only (Vec for block formats)
  bool bf16_native = false;  // BF16 at avx512: VDPBF16PS (see bf16_native())
  bool operator==(const FmtKey&) const = default;
};

// An emitted kernel (reads MatArgs with `act` packed by fmt_pack_activation); owns its code.
class FmtKernel {
 public:
  explicit FmtKernel(const FmtKey& key);
  ~FmtKernel();
  FmtKernel(const FmtKernel&) = delete;
  FmtKernel& operator=(const FmtKernel&) = delete;

  MatFn fn() const { return fn_; }
  std::vector<uint8_t> code() const;  // the machine code (determinism test)

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  MatFn fn_ = nullptr;
};

// Bytes of one token's packed activation for `type` at `isa` (a multiple of 64).
size_t fmt_act_bytes(QuantType type, Isa isa, int64_t k);
// Packs n rows of x ([n, k] floats) into dst (n * fmt_act_bytes bytes).
void fmt_pack_activation(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                         uint8_t* dst);

// Tiles (R x T) used for decode and prefill.
TileShape fmt_decode_tile(QuantType type, Isa isa, int64_t k);
TileShape fmt_gemm_tile(QuantType type, Isa isa);

// Per-family emitters (jit_float_matmul.cpp, jit_block32_matmul.cpp): the code buffer of `key`.
struct EmittedCode {
  std::shared_ptr<void> owner;  // keeps the code alive
  MatFn fn;
  std::vector<uint8_t> bytes;
};
EmittedCode emit_float_kernel(const FmtKey& key);
EmittedCode emit_block32_kernel(const FmtKey& key);
size_t float_act_bytes(QuantType type, Isa isa, int64_t k);
void float_pack_activation(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                           uint8_t* dst);
size_t block32_act_bytes(QuantType type, Isa isa, int64_t k);
void block32_pack_activation(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                             uint8_t* dst);

}  // namespace jitllm::jit
