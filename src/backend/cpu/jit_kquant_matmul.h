// Generated matmul kernels (decode matvec and prefill GEMM tiles) for the K-quants Q2_K, Q3_K and
// Q5_K, their packed Q8_K activation, and the dispatch JitKernels::matmul hands these formats to.
//
// Every super-block of 256 weights is reduced to 16 int16 "sub-group" scales (one per 16
// elements; Q5_K's per-32 scales are repeated twice) and 16 int16 offset coefficients (Q2_K and
// Q5_K: the mins, Q3_K: -4 * scale for its "- 4" levels). The weights are unpacked to unsigned
// bytes (0..3, 0..7, 0..31), multiplied with the activation quants by vpmaddubsw, and weighted by
// the sub-group scale in int16 x int16 -> int32 (vpdpwssd, or vpmaddwd + vpaddd on AVX2): the sum
// per super-block is the exact integer of ggml's vec_dot. The offsets use the activation's
// 16-element sums (one vpmaddwd). On AVX-512, Q2_K's level x scale (<= 45) is looked up as one
// unsigned byte instead, so each token costs a single vpdpbusd per 64 weights. Only the float
// accumulation per lane differs from the reference (~1e-7 relative per super-block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/jit_cpu_features.h"
#include "quant/types.h"

namespace jitllm::jit {

// Q2_K, Q3_K, Q5_K.
bool kq_supported(QuantType type);

// One token's packed Q8_K activation, planes padded to 64 bytes:
//   qs  [k]        int8 quants        (bytes identical to quantize_activation's BlockQ8_K.qs)
//   d   [k / 256]  float scales       (BlockQ8_K.d)
//   s16 [k / 16]   int16 16-quant sums (BlockQ8_K.bsums)
struct KqActLayout {
  int64_t k = 0;
  size_t qs = 0, d = 0, s16 = 0;
  size_t bytes = 0;  // per token, a multiple of 64
};
KqActLayout kq_act_layout(int64_t k);

// Quantizes n rows of x ([n, k] floats, k % 256 == 0) into dst (n * layout.bytes bytes) with the
// generated Q8_K packer of jit_act.cpp; same bytes as quantize_activation (checked in the tests).
// Padding is not written.
void kq_pack_activation(const float* x, int64_t k, int64_t n, uint8_t* dst);

struct KqArgs {
  const uint8_t* w;    // first weight row
  int64_t w_stride;    // bytes per weight row
  int64_t n_rows;      // rows to compute
  const uint8_t* act;  // T packed activation rows, KqActLayout::bytes apart
  float* out;          // out[t * out_stride / 4 + r]
  int64_t out_stride;  // bytes between the outputs of consecutive tokens
};
using KqFn = void (*)(const KqArgs*);

struct KqKey {
  QuantType type;
  int64_t k;
  int rows;    // R: rows per pass (1..4)
  int tokens;  // T: tokens per pass (1..8)
  Isa isa;
  bool operator==(const KqKey&) const = default;
};

// An emitted kernel; owns its code buffer. Throws jitllm::Error for a format without an
// emitter, k not a multiple of 256, or a tile that does not fit the vector registers.
class KqKernel {
 public:
  explicit KqKernel(const KqKey& key);
  ~KqKernel();
  KqKernel(const KqKernel&) = delete;
  KqKernel& operator=(const KqKernel&) = delete;

  KqFn fn() const { return fn_; }
  const KqKey& key() const { return key_; }
  std::vector<uint8_t> code() const;  // the machine code (determinism test)

 private:
  struct Impl;
  KqKey key_;
  std::unique_ptr<Impl> impl_;
  KqFn fn_ = nullptr;
};

struct KqTile {
  int rows, tokens;
};
KqTile kq_decode_tile(QuantType type, Isa isa);
KqTile kq_gemm_tile(QuantType type, Isa isa);

// The kernel for `key` from a process-wide cache (emitted on first use, thread-safe).
const KqKernel& kq_kernel(const KqKey& key);

// out[t * rows + r] = dot(weight row r, x[t]) for t < n, r < rows, with generated kernels on the
// global ThreadPool. Returns false (and does nothing) when `type` is not one of the formats above
// or k is not a multiple of 256, so the caller falls back.
bool matmul_k_quants(Isa isa, QuantType type, const uint8_t* weights, int64_t rows, int64_t k,
                     const float* x, int64_t n, float* out);

}  // namespace jitllm::jit
