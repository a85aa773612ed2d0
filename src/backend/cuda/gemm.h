// Prefill GEMM on tensor cores: out[t, r] = dot(w row r, x[t]) for batches of many rows, through
// cuBLASLt (cublaslt.h, dlopen'ed). The weight stays on the card in its packed form
// (packed_weight.h); per call a generated kernel dequantizes it to an f16 scratch matrix (in
// slices of at most kSliceElems values, which bounds the scratch for the head) and one converts
// the activation, then cuBLASLt multiplies with f32 accumulation:
//  - Q4_K, Q6_K, Q8_0 (and every format stored as F16): f16 x f16 -> f32;
//  - F16 weights are read as they are (no dequantization); BF16 weights as they are, the
//    activation converted to bf16 (f16 could overflow on BF16's range);
//  - F32 weights: plain f32 GEMM on the f32 activation (no conversion).
// Used by CudaOps::matmul for batches of at least gemm_min_rows() rows; below that the dp4a
// matvec kernels (cuda_kernels.h) read fewer bytes and win.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "backend/cuda/compiler.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_kernels.h"
#include "quant/types.h"

namespace jitllm::cuda {

// Dequantization and activation-conversion kernels (runtime shapes). Entry points:
// dequant_q4_k, dequant_q6_k, dequant_q8_0 (one warp per 256/256/32x8-value unit, grid-stride,
// block 256), to_f16, to_bf16 (grid-stride, block 256), embed_rows (grid n, block 256).
std::string gemm_source();

class Gemm {
 public:
  // Values of a dequantized weight slice: 64 Mi halves (128 MiB of scratch).
  static constexpr int64_t kSliceElems = int64_t(64) << 20;
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  // Throws jitllm::Error when cuBLASLt cannot be loaded (check cublaslt_available() first).
  explicit Gemm(Compiler& compiler);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x: [n][w.k] f32, out: [n][w.rows] f32 (every element written). Scratch grows on first use
  // of a larger shape (the stream is synced first); never call it while `s` is being captured
  // with a shape larger than any seen before.
  void matmul(const DeviceWeight& w, CUdeviceptr x, int64_t n, CUdeviceptr out, const Stream& s);

  // Embedding lookup on the card: out[t] = row ids[t] of `table` in f32, bit-equal to
  // dequantize_row on the host. ids: device int32 [n], each in [0, table.rows). Only for tables
  // whose GGUF type passes embeds_on_card() (the formats stored as F16 would come back rounded).
  void embed(const DeviceWeight& table, CUdeviceptr ids, int64_t n, CUdeviceptr out,
             const Stream& s);
  static bool embeds_on_card(QuantType type);

  // Rows per dequantized slice for a row length k (a multiple of 128, at least 128).
  static int64_t slice_rows(int64_t rows, int64_t k);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // A: [m][k] row-major weights (ld k), B: [n][k] row-major activation, D: [n][ldd] f32.
  const Plan& plan(cudaDataType_t ab, int64_t m, int64_t n, int64_t k, int64_t ldd);
  void grow(DeviceBuffer& buf, size_t bytes, const Stream& s);
  CUfunction fn(const char* name);

  Compiler& compiler_;
  const Module* module_ = nullptr;
  std::map<std::string, CUfunction> fns_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t>, Plan> plans_;
  DeviceBuffer wh_;         // dequantized weight slice [slice_rows][k] f16
  DeviceBuffer xh_;         // activation [n][k] f16 / bf16
  DeviceBuffer workspace_;  // cuBLASLt's
};

// The smallest batch that takes the GEMM (16 rows).
// CudaOps also keeps decode steps (graph-captured) on the matvec kernels.
int64_t gemm_min_rows();

}  // namespace jitllm::cuda
