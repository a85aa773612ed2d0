// Decode (batch-1) matvec kernels: out[r] = dot(weight row r, x) for quantized weights, emitted
// with Xbyak per (format, k, rows per pass, ISA), with the packed activation they read and the
// dispatch that spreads rows (of one matrix or of a group sharing one input) over the pool.
//
// Why separate from the prefill GEMM (jit_matmul.h): decode reads every weight byte once per
// token, so it is bound by instructions per weight byte, not by reuse. These kernels spend the
// fewest vector ops per weight byte on AVX-512: Q4_K/Q6_K multiply u8 weights by s8 activations
// with vpmaddubsw and apply the group scales with one vpdpwssd per 64 weights (the activation is
// permuted at pack time so one 64-byte weight load serves 128 elements); Q8_0 puts two rows in
// the halves of one zmm so each lane keeps ggml's exact per-block float order. AVX2 / AVX-VNNI
// run the same arithmetic on ymm (8 lanes, VEX only).
//
// Weights: GGUF rows (R row streams at the row stride) or, in decode, the row-interleaved copy of
// jit_repack.h in 2 MiB pages (one sequential stream per pass of R = 4 rows, prefetched 8 KiB
// ahead): same bytes, same arithmetic, same results bit for bit; from DRAM one core reads every
// format that way at about the rate the best GGUF-row kernel reaches (docs/perf/cpu.md, the
// kernel GB/s table of the repacked decode).
//
// Numerics: integer sums per block / super-block are exact; Q8_0 floats are bit-identical to
// ggml's AVX2 vec_dot (per lane: acc = fma(float(isum), d_w * d_a, acc), hsum_float_8 at the end);
// K formats accumulate float(isum) * (d * d_a) over 16 lanes (~1e-7 relative from the reference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/cpu/jit_cpu_features.h"
#include "quant/types.h"

namespace jitllm {
class ThreadPool;
}

namespace jitllm::jit {

struct RepackedMatrix;

// Whether a generated matvec exists for (type, isa, k).
bool matvec_supported(QuantType type, Isa isa, int64_t k);

// The packed activation of one token (x: k floats), per format family:
//   Q4_K: per super-block a 320-byte record: quants [256] (AVX-512: the 32-element groups in the
//         order g0 g2 g1 g3 g4 g6 g5 g7), int16 [0 x8, group sums x8], float d, padding.
//   Q6_K: the same record with quants in natural order and the 16 int16 sums of 16 quants.
//   Q8_0: per block a 128-byte record: quants [32] twice, int32 [-128 * sum of quants 4l..4l+3]
//         for l = 0..7 twice; then a plane of k/32 float scales.
// Quants and scales are exactly quantize_activation's.
size_t matvec_act_bytes(QuantType type, int64_t k);
void pack_matvec_act(QuantType type, Isa isa, const float* x, int64_t k, uint8_t* dst);

struct MatvecArgs {
  const uint8_t* w;    // first weight row
  int64_t w_stride;    // bytes per weight row
  int64_t n_rows;      // rows to compute
  const uint8_t* act;  // packed activation (pack_matvec_act)
  float* out;          // [n_rows]
  const uint8_t* side; // repacked layouts: the side plane at the first row (jit_repack.h)
};
using MatvecFn = void (*)(const MatvecArgs*);

struct MatvecKey {
  QuantType type;
  int64_t k;
  int rows;  // rows per pass (the tail runs one row at a time)
  Isa isa;
  // false: GGUF rows w_stride apart; true: the row-interleaved layout of jit_repack.h (rows must
  // be kRepackGroup; w_stride is unused, the kernel walks the planes forward).
  bool packed = false;
  bool operator==(const MatvecKey&) const = default;
};

// An emitted kernel; owns its code buffer.
class MatvecKernel {
 public:
  explicit MatvecKernel(const MatvecKey& key);
  ~MatvecKernel();
  MatvecKernel(const MatvecKernel&) = delete;
  MatvecKernel& operator=(const MatvecKernel&) = delete;

  MatvecFn fn() const { return fn_; }
  // The emitted machine code (for the determinism test).
  std::vector<uint8_t> code() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  MatvecFn fn_ = nullptr;
};

// Rows per pass chosen for a format.
int matvec_rows(QuantType type, Isa isa);
// The process-wide kernel for `key`, emitted on first use (thread-safe).
const MatvecKernel& matvec_kernel(const MatvecKey& key);

// One matrix of a group that shares its input x.
struct MatvecTarget {
  QuantType type;
  const uint8_t* weights;  // [rows, row_bytes(type, k)]
  int64_t rows;
  float* out;  // [rows]
  // The row-interleaved copy of `weights` (jit_repack.h) the kernels read instead, or nullptr.
  const RepackedMatrix* packed = nullptr;
};
// out = W x for every target (all must be matvec_supported), as one work list over the pool:
// the input is packed once per format family, and rows of all targets are handed out in chunks.
void matvec_group(Isa isa, std::span<const MatvecTarget> mats, int64_t k, const float* x,
                  ThreadPool& pool);

}  // namespace jitllm::jit
