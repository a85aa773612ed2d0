// Batched decode on int8 tensor cores ("MMQ"): out[t][r] = dot(w row r, x[t]) for steps of about
// 8..64 activation rows, with every weight byte read once per step for all rows (the dp4a matvec
// re-reads the activation per group of weight rows and takes passes of 8 rows).
//  - Weights are read as the matvec stores them on the card (packed_weight.h): Q4_K GGUF blocks,
//    the repacked Q6_K and Q8_0. Other kinds (and a Q4_K stored with a separate scale plane) are
//    not handled here: supports() says so and the caller keeps the matvec.
//  - The activation is the matvec's: int8 blocks of 32 with (d, d*sum) from quantize_q8, rows
//    padded to a multiple of 8 (CudaKernels::q8_bytes does that for n >= 5).
//  - The integer dot of each 32-block (16 for Q6_K's scale groups) is exact on the tensor cores;
//    scales (and Q4_K's mins through the activation block sums) are applied in f32 after it, so a
//    row differs from the solo matvec only in the order of the f32 sums.
// Owns no device memory; launches on the caller's stream (captured into decode graphs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/dq_mma.h"

namespace jitllm::cuda {

// Most activation rows one launch takes (all of them in one CTA: 8 tiles of 8).
inline constexpr int kMmqMaxRows = 64;

// One MMQ kernel variant: 1..3 matrices of row length k reading one activation, NT8 tiles of 8
// activation rows, MT tiles of 16 weight rows per CTA, WARPS warps splitting the row length.
struct MmqSpec {
  WeightKind kinds[3] = {WeightKind::Q4_K, WeightKind::Q4_K, WeightKind::Q4_K};
  int nseg = 1;
  int64_t k = 0;
  int nt8 = 1, mt = 2, warps = 8;
  std::string name() const;
};

// True when the MMQ kernel reads this kind at row length k.
bool mmq_supports(WeightKind kind, int64_t k);
// CUDA C++ text of one variant; entry point "mmq". Throws for unsupported kinds or shapes.
std::string mmq_source(const MmqSpec& spec);

class Mmq {
 public:
  explicit Mmq(Compiler& compiler);

  // True when every segment can run here (kinds, row length, and the Q4_K layout as stored).
  static bool supports(std::span<const MatmulSeg> segs);
  // Smallest row count that takes the MMQ in a decode step.
  static int64_t min_rows();

  // segs[i].out [n][rows_i] = x . w_i^T (and res += the same); q8 holds x quantized (rows padded
  // to a multiple of 8), 1 <= n <= kMmqMaxRows.
  // With xh (an f16 buffer of DqMma::f16_bytes(n, k)) and use_dq(segs), the step runs on the
  // f16 tensor cores instead (dq_mma.h).
  void matmul_group(std::span<const MatmulSeg> segs, int64_t n, Q8Buffers q8, const Stream& s,
                    CUdeviceptr xh = 0);
  // True when a batched step of these matrices takes the DQ-MMA kernel (JITLLM_CUDA_DQMMA).
  static bool use_dq(std::span<const MatmulSeg> segs) { return DqMma::enabled() && DqMma::supports(segs); }
  DqMma& dq() { return dq_; }

  // Benches and tests: force tiles per CTA / warps per CTA (0 = the defaults).
  void tune(int mt, int warps) {
    mt_override_ = mt;
    warps_override_ = warps;
  }
  // JITLLM_CUDA_PROFILE: every launch timed (as CudaKernels does).
  void set_profiling(bool on) {
    profiling_ = on;
    dq_.set_profiling(on);
  }
  const KernelProfile& profile() const { return profile_; }

 private:
  CUfunction function(const MmqSpec& spec);

  Compiler& compiler_;
  DqMma dq_;
  std::map<std::string, CUfunction> fns_;  // by MmqSpec::name()
  int mt_override_ = 0, warps_override_ = 0;
  bool profiling_ = false;
  KernelProfile profile_;
};

}  // namespace jitllm::cuda
