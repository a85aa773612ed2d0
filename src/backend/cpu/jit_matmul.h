// Generated integer-dot matmul kernels (decode matvec and prefill GEMM tiles) for quantized weights,
// and the packed activation they read.
//
// A kernel is emitted for one (format, k, rows per pass R, tokens per pass T, ISA): it walks
// `n_rows` weight rows R at a time (then one at a time for the tail), and for each row computes
// the dots with T packed activation rows. Weight blocks are unpacked once per row and reused for
// the T tokens, which is what makes the T > 1 (prefill) tiles cheaper per token.
//
// Numerics: the activation is quantized exactly as the reference does (quantize_activation), and
// every per-block / per-super-block sum is an exact integer (offsets such as Q4_0's "- 8" are
// folded in through the activation's block sums). Only the float accumulation differs from the
// reference: lane-wise (8 lanes) instead of one scalar per block (~1e-7 relative per block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/jit_cpu_features.h"
#include "quant/types.h"

namespace jitllm::jit {

// Formats with a generated matmul.
bool jit_matmul_supported(QuantType type);

// One token's packed activation: int8 quants, float scales (one per 32-block or 256-super-block),
// int32 per-32 values (32-block formats: -bias_mul * sum of the block's quants; K formats: the sum
// of each 32-element group), and int16 per-16 sums (K formats). Sizes padded to 64 bytes.
struct ActLayout {
  static constexpr size_t kNoPlane = ~size_t(0);  // s32 of a layout without that plane
  int64_t k = 0;
  size_t qs = 0, d = 0, s32 = 0, s16 = 0;
  size_t bytes = 0;  // per token, a multiple of 64
};
ActLayout act_layout(QuantType weight_type, int64_t k);

// Quantizes n rows of x ([n, k] floats) for `weight_type` into dst (n * layout.bytes bytes) with a
// generated kernel (AVX2 encodings, emitted once per packing and k). The quants and scales are
// bit-identical to quantize_activation's; padding is not written.
void pack_activation(QuantType weight_type, Isa isa, const float* x, int64_t k, int64_t n,
                     uint8_t* dst);
// Q8_K packing (the K formats' quants, scales and sums) into any layout `l` (l.s32 may be
// ActLayout::kNoPlane: that plane is then not written); the K-quant kernels' packing uses it.
void pack_q8k_activation(const ActLayout& l, const float* x, int64_t n, uint8_t* dst);
// The machine code of that kernel, freshly emitted (for the determinism test).
std::vector<uint8_t> act_kernel_code(QuantType weight_type, Isa isa, int64_t k);
// The same through the scalar reference quantize_activation (the test oracle of the above).
void pack_activation_reference(QuantType weight_type, Isa isa, const float* x, int64_t k,
                               int64_t n, uint8_t* dst);

struct MatArgs {
  const uint8_t* w;     // first weight row
  int64_t w_stride;     // bytes per weight row
  int64_t n_rows;       // rows to compute
  const uint8_t* act;   // T packed activation rows, ActLayout::bytes apart
  float* out;           // out[t * out_stride_bytes / 4 + r]
  int64_t out_stride;   // bytes between the outputs of consecutive tokens
};
using MatFn = void (*)(const MatArgs*);

struct MatKey {
  QuantType type;
  int64_t k;
  int rows;    // R
  int tokens;  // T
  Isa isa;
  bool operator==(const MatKey&) const = default;
};

// An emitted kernel; owns its code buffer.
class MatKernel {
 public:
  explicit MatKernel(const MatKey& key);
  ~MatKernel();
  MatKernel(const MatKernel&) = delete;
  MatKernel& operator=(const MatKernel&) = delete;

  MatFn fn() const { return fn_; }
  const MatKey& key() const { return key_; }
  // The emitted machine code (for the determinism test).
  std::vector<uint8_t> code() const;

 private:
  struct Impl;
  MatKey key_;
  std::unique_ptr<Impl> impl_;
  MatFn fn_ = nullptr;
};

// Tile shapes used for a format on an ISA: decode (T = 1) and prefill GEMM.
struct TileShape {
  int rows, tokens;
};
TileShape decode_tile(QuantType type, Isa isa, int64_t k);
TileShape gemm_tile(QuantType type, Isa isa, int64_t k);

}  // namespace jitllm::jit
