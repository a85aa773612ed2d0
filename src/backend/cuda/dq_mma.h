// Batched decode on f16 tensor cores ("DQ-MMA"): out[t][r] = dot(w row r, x[t]) for steps of
// 8..64 activation rows, every weight byte read once per step for all rows. The weights are
// dequantized to f16 in registers (scale and min folded into each value) and multiplied on the
// tensor cores (mma.sync m16n8k16, f32 accumulation), so the f32 scale work that the int8 MMQ
// (mmq.h) does after every MMA is gone; each dequantized block is used for all activation rows.
//  - Weights are read as the matvec stores them on the card (packed_weight.h): Q4_K GGUF blocks,
//    the repacked Q6_K and Q8_0; rows whose length is a multiple of 256.
//  - The activation is the matvec's q8 rows as f16(q d) (rows padded to a multiple of 8), written
//    by the kernel that quantized them (Q8Buffers::h) or by q8_to_f16 here, so a batched row sees
//    the activation the solo matvec rounds to, up to the f16 rounding of each value; the weights
//    differ from the exact dequantization by their f16 rounding. Repeated calls give the same
//    bits (fixed MMA order).
// The caller passes the f16 activation buffer (f16_bytes()); DqMma owns no device memory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "backend/cuda/cuda_kernels.h"

namespace jitllm::cuda {

// One variant: 1..3 matrices of row length k reading one activation, NT8 tiles of 8 activation
// rows, MT tiles of 16 weight rows per warp, WARPS warps per CTA (16 MT WARPS rows, or 16 MT with
// splitk).
struct DqMmaSpec {
  WeightKind kinds[3] = {WeightKind::Q4_K, WeightKind::Q4_K, WeightKind::Q4_K};
  int nseg = 1;
  int64_t k = 0;
  int nt8 = 1, mt = 2, warps = 4;
  // The warps split the row length of 16 MT rows (activation read from global memory, tiles
  // added in shared memory at the end) instead of each owning 16 MT rows of the whole length.
  bool splitk = false;
  // Steps of weights in each warp's register ring (2..4): NB - 1 steps in flight during a step's
  // MMAs; without splitk also the CTA's staging buffers of the activation.
  int stages = 2;
  // Two matrices gate, up of one kind: writes silu(gate) up (f32, q8, f16) instead (rows per warp).
  bool swiglu = false;
  std::string name() const;
};

// True when the kernel reads this kind at row length k.
bool dq_mma_supports(WeightKind kind, int64_t k);
// Dynamic shared memory of a launch: the staging buffers of the activation (or the reduction
// tile with splitk).
size_t dq_mma_smem_bytes(const DqMmaSpec& spec);
// CUDA C++ text of one variant (entry point "dqmma"), and of the q8 -> f16 conversion
// ("q8_to_f16"). Throws for unsupported kinds or shapes.
std::string dq_mma_source(const DqMmaSpec& spec);
std::string q8_to_f16_source();

class DqMma {
 public:
  explicit DqMma(Compiler& compiler);

  // True when every segment can run here (kinds, row length, the Q4_K layout as stored).
  static bool supports(std::span<const MatmulSeg> segs);
  // JITLLM_CUDA_DQMMA (default 1): 0 keeps the int8 MMQ for every batched step.
  static bool enabled();
  // Bytes of the f16 activation for n rows of k (n padded to a multiple of 8).
  static size_t f16_bytes(int64_t n, int64_t k);

  // segs[i].out [n][rows_i] = x . w_i^T (and res += the same); q8 holds x quantized (rows padded
  // to a multiple of 8); xh receives its f16 copy (f16_bytes(n, k)), or already holds it when
  // q8.h == xh (the quantizing kernel wrote it); 1 <= n <= 64.
  void matmul_group(std::span<const MatmulSeg> segs, int64_t n, Q8Buffers q8, CUdeviceptr xh,
                    const Stream& s);

  // Launches of at least this many rows (all matrices together) take the rows-per-warp shape.
  static constexpr int64_t kWideRows = 16384;
  // The SwiGLU epilogue (on by default; JITLLM_CUDA_DQ_SWIGLU=0 runs gate/up and swiglu_q8): gate
  // and up (segs[0], segs[1], no residual) of one kind, rows a multiple of 32; then
  // out [n][rows] = silu(x . gate^T) * (x . up^T), its q8 rows into y (y.h: their f16 copy), the
  // bits of the rows-per-warp matmul_group (the default for gate + up >= kWideRows rows; CudaOps
  // fuses only those) followed by swiglu_q8. gate's and up's own outputs are not written.
  static bool swiglu_enabled();
  static bool swiglu_fits(std::span<const MatmulSeg> segs);
  void matmul_swiglu(std::span<const MatmulSeg> segs, int64_t n, Q8Buffers q8, CUdeviceptr xh,
                     CUdeviceptr out, Q8Buffers y, const Stream& s);

  // Benches and tests: force tiles per warp / warps per CTA (0 = the defaults) / the split of the
  // row length over the warps (-1 = the default, 0 off, 1 on) / the steps in the ring (0 = the
  // default).
  void tune(int mt, int warps, int splitk = -1, int stages = 0) {
    mt_override_ = mt;
    warps_override_ = warps;
    splitk_override_ = splitk;
    stages_override_ = stages;
  }
  // Tests: the variant (DqMmaSpec::name()) of the last launch.
  const std::string& last_variant() const { return last_variant_ ? *last_variant_ : kNone; }
  void set_profiling(bool on) { profiling_ = on; }
  const KernelProfile& profile() const { return profile_; }
  // Programmatic dependent launch (sm_90): the kernel's first weight loads are issued before it
  // waits for the previous kernel (dq_mma_source.cpp: PDL_WAIT after them).
  void set_pdl(bool on) { pdl_ = on; }

 private:
  CUfunction function(const DqMmaSpec& spec);
  void run(CUfunction f, unsigned grid, unsigned grid_y, unsigned block, size_t smem, const Stream& s,
           void** args, const std::string& label);

  Compiler& compiler_;
  std::map<std::string, CUfunction> fns_;  // by DqMmaSpec::name()
  CUfunction to_f16_ = nullptr;
  int mt_override_ = 0, warps_override_ = 0, splitk_override_ = -1, stages_override_ = 0;
  const std::string* last_variant_ = nullptr;  // a key of fns_
  inline static const std::string kNone;
  bool profiling_ = false, pdl_ = false;
  KernelProfile profile_;
};

}  // namespace jitllm::cuda
