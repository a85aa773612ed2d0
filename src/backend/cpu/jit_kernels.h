// JitKernels: the CpuKernels implementation with generated (Xbyak) code. Matmuls of the formats
// with an emitter (jit_matmul.h) run generated decode/GEMM kernels from an in-process cache; every
// other op and format falls back to the reference kernels, which are also the tests' oracle.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_cpu_features.h"
#include "backend/cpu/jit_matmul.h"
#include "backend/cpu/reference_kernels.h"

namespace jitllm {

class JitKernels final : public CpuKernels {
 public:
  // amx: prompt GEMMs of the formats jit_amx.h takes run on AMX tiles (needs jit::amx_usable()
  // and isa Avx512Vnni); everything else runs the `isa` kernels.
  explicit JitKernels(jit::Isa isa, bool amx = false);
  const char* name() const override { return name_; }
  jit::Isa isa() const { return isa_; }
  bool amx() const { return amx_; }
  bool batch_invariant() const override { return !amx_; }

  void matmul(QuantType type, const uint8_t* weights, int64_t rows, int64_t k, const float* x,
              int64_t n, float* out) const override;
  void matmul_group(std::span<const MatmulTarget> mats, int64_t k, const float* x,
                    int64_t n) const override;
  // The row-interleaved decode copy (jit_repack.h) of Q8_0 / Q4_K / Q6_K matrices the matvec
  // kernels run (nullptr for others, or with JITLLM_REPACK=0).
  std::unique_ptr<PreparedWeights> prepare_weights(QuantType type, const uint8_t* weights,
                                                   int64_t rows, int64_t k) const override;
  // With AMX: Q8_0 / Q4_K / Q6_K decode and prompt steps on the tiles read the interleaved copy
  // (jit_amx.h AmxSource); steps of 2-15 tokens (31 for Q8_0) read the original.
  bool prefill_reads_prepared(QuantType type, int64_t k) const override;
  bool rows_from_prepared(const PreparedWeights& copy, const int32_t* ids, int64_t n,
                          uint8_t* dst) const override;
  void get_rows(QuantType type, const uint8_t* table, int64_t k, const int32_t* ids, int64_t n,
                float* out) const override;
  void rms_norm(const float* x, const float* w, int64_t n, int64_t dim, float eps,
                float* out) const override;
  void rope(float* x, int64_t n, int n_heads, int head_dim, const int32_t* pos,
            const RopeParams& params) const override;
  void swiglu(const float* gate, const float* up, float* out, int64_t count) const override;
  void add(float* acc, const float* x, int64_t count) const override;
  void store_rows(QuantType type, const float* src, int64_t n, int64_t dim,
                  uint8_t* const* dst) const override;
  void attention(const AttentionArgs& args) const override;

  // The kernel for `key`, emitted on first use (thread-safe).
  const jit::MatKernel& mat_kernel(const jit::MatKey& key) const;

 private:
  struct KeyHash {
    size_t operator()(const jit::MatKey& k) const;
  };
  jit::Isa isa_;
  bool amx_;
  const char* name_;
  const CpuKernels& ref_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<jit::MatKey, std::unique_ptr<jit::MatKernel>, KeyHash> cache_;
};

// The process-wide generated kernels for jit::selected_isa(). Kernels by name (--kernels,
// JITLLM_KERNELS) are chosen above the backend, in runtime/cpu_kernels.h.
const CpuKernels& jit_kernels();

}  // namespace jitllm
