// Ops on the host: activations in RAM, kernels from a CpuKernels implementation (the reference
// kernels or generated ones); the fused ops run as their plain twins (graph/ops.cpp). Owns the
// scratch arena reused from step to step and the kernels' decode copies of the weights (made on a
// matrix's first decode-sized step, which the engine's warm-up runs at load; prompt steps read a
// copy too where the kernels can, and the original's pages are then given back).
#pragma once

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "graph/ops.h"

namespace jitllm {

class CpuOps final : public Ops {
 public:
  explicit CpuOps(const CpuKernels& kernels = reference_kernels()) : k_(kernels) {}

  void begin(const Batch& batch, const KvLayout& kv) override;
  Act alloc(int64_t rows, int64_t cols) override;
  void embed(const TensorInfo& table, Act out) override;
  void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) override;
  void matmul(const TensorInfo& w, Act x, Act out) override;
  void matmul_group(Act x, std::span<const MatmulOut> outs) override;
  void rope(Act x, int n_heads, int head_dim, const RopeParams& params) override;
  void attention(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec) override;
  void swiglu(Act gate, Act up, Act out) override;
  void geglu(Act gate, Act up, Act out) override;
  void add(Act acc, Act x) override;
  void add_bias(Act x, const std::vector<float>& bias) override;
  void swiglu_oai(Act gate, Act up, Act out, float alpha, float limit) override;
  void scale(Act x, float s) override;
  void softcap(Act x, float cap) override;
  void layer_norm(Act x, const std::vector<float>& w, const std::vector<float>& b, float eps,
                  Act out) override;
  void gelu(Act x, Act out) override;
  void add_table_rows(const TensorInfo& table, std::span<const int32_t> ids, Act x) override;
  void mul(Act acc, Act x) override;
  void short_conv(int il, Act x, const std::vector<float>& kernel, int L, Act out) override;
  void copy_cols(Act x, int64_t first, Act out) override;
  void copy_cols_into(Act x, Act out, int64_t first) override;
  void select_rows(Act x, std::span<const int32_t> rows, Act out) override;
  void weighted_sum_rows(Act x, std::span<const int32_t> rows, std::span<const float> coef,
                         Act out) override;
  void read(Act x, float* host) override;
  void write(Act x, const float* host) override;
  // The plain twin (graph/moe.cpp), after a decode-sized step (kPrepareExpertsRows rows or fewer)
  // has made every expert's decode copy of the layer: a token chooses a few experts, so left to
  // their first decode use the copies would be made over the first hundred steps, inside them.
  void moe_ffn(Act x, const MoeExperts& w, const MoeRouting& r, const MoeScratch& s, Act out) override;

 private:
  static constexpr int64_t kPrepareExpertsRows = 64;
  const CpuKernels& k_;
  Batch batch_;
  KvLayout kv_;  // a copy: callers may pass a layout that lives only for begin()
  // Scratch: buffer i is handed out by the i-th alloc() of a step; the graph allocates in the
  // same order every step, so buffers are reused and only grow.
  std::vector<std::vector<float>> scratch_;
  size_t next_ = 0;
  std::vector<PagedRows> k_rows_, v_rows_;  // [n_rows] per attention call
  std::vector<int64_t> n_kv_, kv_start_;    // [n_rows]
  std::vector<uint8_t*> dst_;               // [n_rows]
  std::vector<CpuKernels::MatmulTarget> group_;  // matmul_group's matrices
  // The kernels' decode copies of weight matrices (CpuKernels::prepare_weights), by the
  // matrix's data pointer, made on a matrix's first decode step (nullptr: the kernels read the
  // original). The weights outlive this object (the engine holds the model file).
  std::unordered_map<const uint8_t*, std::unique_ptr<PreparedWeights>> prepared_;
  const PreparedWeights* prepared(const TensorInfo& w);
  const PreparedWeights* existing_copy(const TensorInfo& w) const;  // nullptr: none made yet
  std::vector<uint8_t> rows_;  // embed(): the batch's table rows from a decode copy
  std::vector<int32_t> ids_;   // 0..n-1 into rows_
  std::vector<float> rows_f32_;  // add_table_rows(): the rows as floats [n, cols]
  std::unordered_set<const TensorInfo*> experts_prepared_;  // layers (their first gate expert) done
};

}  // namespace jitllm
