// The CPU kernel interface the model's ops call (`CpuKernels`), and its plain C++ implementation
// (`ReferenceKernels`). Generated (Xbyak) kernels implement the same interface later and are
// tested against this one; it is also their fallback for shapes/formats they do not cover.
//
// Numerics follow llama.cpp's CPU backend (b10472) where it matters for matching its logits:
// matmuls convert the activation to the weight format's vec_dot_type first and take one vec_dot
// per output element; attention reproduces ggml's flash-attention paths (see AttentionArgs).
// Every kernel is deterministic and independent of the thread count: threads split output rows
// (or (row, head) pairs), never a reduction.
//
// This layer knows nothing about models: it sees formats, shapes and pointers (and the graph
// layer's plain types: RopeParams, PagedRows).
#pragma once

#include <cmath>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "graph/kv.h"
#include "graph/rope.h"
#include "quant/types.h"

namespace jitllm {

// One attention call over a ragged batch: query row r (one token of some sequence) attends the
// first n_kv[r] positions of its sequence's K and V (causal: n_kv[r] = its position + 1).
struct AttentionArgs {
  int n_head = 0, n_head_kv = 0, head_dim = 0;  // query head h uses KV head h / (n_head / n_head_kv)
  // Per head: v and output width; 0 = head_dim. Wider or narrower than the q/k head for MLA, whose
  // V rows are the K rows' first head_dim_v values (k and v then point at the same rows).
  int head_dim_v = 0;
  bool v_in_k = false;  // V rows are the K rows: KV head g's V starts where its K head does
  float scale = 1.0f;                           // 1/sqrt(head_dim)
  QuantType kv_type = QuantType::F16;           // F16 or F32 rows of n_head_kv * head_dim
  int64_t n_rows = 0;
  const float* q = nullptr;   // [n_rows, n_head * head_dim]
  float* out = nullptr;       // [n_rows, n_head * head_dim_v]
  const int64_t* n_kv = nullptr;       // [n_rows] keys [kv_start, n_kv) of its sequence
  const int64_t* kv_start = nullptr;   // [n_rows] first key a row sees (sliding window); null: 0
  float softcap = 0.0f;                // > 0: scores = softcap * tanh(scale * q.k / softcap)
  const float* sinks = nullptr;        // [n_head] sink logits (gpt-oss), or null: see apply_sink
  const PagedRows* k = nullptr;        // [n_rows] (rows of one sequence share the same view)
  const PagedRows* v = nullptr;        // [n_rows]
  // Which of ggml's flash-attention paths to reproduce:
  //  - false (ggml's "one_chunk" path, used for ubatches of < 64 tokens): Q rounded to F16, K.Q
  //    in f32, online softmax one key at a time, V accumulated in an F16 buffer when V is F16.
  //  - true (ggml's tiled path, ubatches of >= 64 tokens): Q stays f32, scores and V
  //    accumulation in f32, softmax max/sum per tile of 64 keys.
  bool f32_tiles = false;
};

// A backend's private copy of a weight matrix (see CpuKernels::prepare_weights).
struct PreparedWeights {
  virtual ~PreparedWeights() = default;
};

// A head's attention sink (gpt-oss): one more logit in the softmax's denominator, with no value.
// After the keys (M their largest score, S the sum of exp(score - M)) it joins the sum as ggml's
// flash attention adds it: rescaling by exp(M - sink) when it is the new maximum. Returns the
// factor the accumulated values are multiplied by before the division by S.
inline float apply_sink(float sink, float M, float& S) {
  if (sink > M) {
    const float ms = std::exp(M - sink);
    S = S * ms + 1.0f;
    return ms;
  }
  S += std::exp(sink - M);
  return 1.0f;
}

class CpuKernels {
 public:
  virtual ~CpuKernels() = default;
  virtual const char* name() const = 0;
  // Whether every (row, token) of a matmul is computed with the same float operations whatever
  // else the call holds (a prefill tile gives a token what decode gives it alone), so a
  // sequence's numbers do not depend on its batch mates. The AMX tiles are not: their float order
  // differs from the decode kernels'.
  virtual bool batch_invariant() const { return true; }

  // A copy of a weight matrix (rows x row_bytes(type, k) GGUF bytes) in a layout this backend's
  // decode kernels read faster, made once per matrix by the owner of the weights and passed back
  // in MatmulTarget::prepared; nullptr when the backend has none for it (the default).
  virtual std::unique_ptr<PreparedWeights> prepare_weights(QuantType type, const uint8_t* weights,
                                                           int64_t rows, int64_t k) const {
    (void)type, (void)weights, (void)rows, (void)k;
    return nullptr;
  }

  // Whether, once a matrix has a decode copy (prepare_weights), decode and prompt steps of it
  // with MatmulTarget::prepared set read the copy, so the original's pages can be given back
  // (steps the copy does not serve may read, and so fault in, the original again).
  virtual bool prefill_reads_prepared(QuantType type, int64_t k) const {
    (void)type, (void)k;
    return false;
  }

  // Rows ids[0..n) of a matrix put back in the file's layout from its decode copy (n x
  // row_bytes(type, k) bytes at dst), for readers of single rows such as the embedding lookup;
  // false when `copy` is not this backend's.
  virtual bool rows_from_prepared(const PreparedWeights& copy, const int32_t* ids, int64_t n,
                                  uint8_t* dst) const {
    (void)copy, (void)ids, (void)n, (void)dst;
    return false;
  }

  // out[t, r] = dot(weight row r, x[t]) for t < n, r < rows. weights: rows x row_bytes(type, k)
  // bytes in GGUF block layout; x: [n, k] floats; out: [n, rows].
  virtual void matmul(QuantType type, const uint8_t* weights, int64_t rows, int64_t k,
                      const float* x, int64_t n, float* out) const = 0;

  // Several matmuls over one input x ([n, k]): q/k/v, gate/up. A backend may quantize x once and
  // spread all rows of all matrices over the pool in one dispatch; the default runs them in turn.
  struct MatmulTarget {
    QuantType type;
    const uint8_t* weights;
    int64_t rows;
    float* out;  // [n, rows]
    // This backend's copy of `weights` from prepare_weights (nullptr: none); the copy must stand
    // for the same matrix, read by decode (n == 1) where the backend wants it.
    const PreparedWeights* prepared = nullptr;
  };
  virtual void matmul_group(std::span<const MatmulTarget> mats, int64_t k, const float* x,
                            int64_t n) const {
    for (const MatmulTarget& m : mats) matmul(m.type, m.weights, m.rows, k, x, n, m.out);
  }

  // out[t] = table row ids[t] as floats. table: rows of row_bytes(type, k) bytes; out: [n, k].
  virtual void get_rows(QuantType type, const uint8_t* table, int64_t k, const int32_t* ids,
                        int64_t n, float* out) const = 0;

  // out[t, i] = x[t, i] / sqrt(mean(x[t]^2) + eps) * w[i]. x, out: [n, dim] (may alias); w: [dim].
  virtual void rms_norm(const float* x, const float* w, int64_t n, int64_t dim, float eps,
                        float* out) const = 0;

  // In place on x: [n, n_heads, head_dim]; pos: [n] positions.
  virtual void rope(float* x, int64_t n, int n_heads, int head_dim, const int32_t* pos,
                    const RopeParams& params) const = 0;

  // out[i] = silu(gate[i]) * up[i], count elements (out may alias gate).
  virtual void swiglu(const float* gate, const float* up, float* out, int64_t count) const = 0;

  // acc[i] += x[i].
  virtual void add(float* acc, const float* x, int64_t count) const = 0;

  // The small elementwise ops of the families beyond llama; the defaults are plain loops
  // (reference_elementwise.cpp), which every backend shares unless it has faster ones.
  // out[i] = gelu_tanh(gate[i]) * up[i] (out may alias gate).
  virtual void geglu(const float* gate, const float* up, float* out, int64_t count) const;
  // gpt-oss's clamped SwiGLU (graph/ops.h Ops::swiglu_oai), as ggml's swiglu_oai computes it.
  virtual void swiglu_oai(const float* gate, const float* up, float* out, int64_t count,
                          float alpha, float limit) const;
  // x[t, i] += bias[i]: x [n, dim], bias [dim].
  virtual void add_rows(float* x, const float* bias, int64_t n, int64_t dim) const;
  // x[i] *= s.
  virtual void scale(float* x, float s, int64_t count) const;
  // x[i] = cap * tanh(x[i] / cap).
  virtual void softcap(float* x, float cap, int64_t count) const;
  // LayerNorm of each row: out[t, i] = (x[t, i] - mean(x[t])) / sqrt(var(x[t]) + eps) * w[i] +
  // b[i], w or b null: 1 or 0. x, out: [n, dim] (may alias).
  virtual void layer_norm(const float* x, const float* w, const float* b, int64_t n, int64_t dim,
                          float eps, float* out) const;
  // out[i] = gelu(x[i]) = x/2 (1 + erf(x / sqrt 2)), the exact GELU (BERT's); out may alias x.
  virtual void gelu_erf(const float* x, float* out, int64_t count) const;

  // Converts n rows of `dim` floats (src: [n, dim]) to `type` (F16 or F32) at dst[t].
  virtual void store_rows(QuantType type, const float* src, int64_t n, int64_t dim,
                          uint8_t* const* dst) const = 0;

  virtual void attention(const AttentionArgs& args) const = 0;
};

class ReferenceKernels final : public CpuKernels {
 public:
  const char* name() const override { return "reference"; }
  void matmul(QuantType type, const uint8_t* weights, int64_t rows, int64_t k, const float* x,
              int64_t n, float* out) const override;
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
};

// The process-wide reference kernels.
const CpuKernels& reference_kernels();

// Float dot products shared by the reference matmul and attention, in the two summation orders
// llama.cpp's CPU backend uses (so results can be bit-identical to it):
//  - dot_f32 / dot_f16_f16: tinyBLAS order (one 16-lane fused accumulator, pairwise reduction);
//  - *_vec: ggml_vec_dot order (4 x 16 lanes over steps of 64, tail in double).
float dot_f32(const float* a, const float* b, int64_t n);
float dot_f16_f16(const uint16_t* a, const uint16_t* b, int64_t n);
float dot_f32_vec(const float* a, const float* b, int64_t n);
float dot_f16_f16_vec(const uint16_t* a, const uint16_t* b, int64_t n);

// ggml's vectorised expf and silu (ggml_v_expf / ggml_v_silu of ggml-cpu's vec.h in an AVX-512
// build, max error ~1.5 ulp; the AVX2 build evaluates the same polynomial as k + k*p, which can
// differ in the last bit), one element at a time. llama.cpp's SwiGLU uses them for every element
// of rows whose length is a multiple of 16 (libm's expf only for a row's tail), so the reference
// and generated kernels use them too.
float ggml_vec_expf(float x);
float ggml_vec_silu(float x);  // x / (1 + ggml_vec_expf(-x))
float gelu_tanh(float x);      // GELU, tanh approximation (reference_elementwise.cpp)
// An attention score soft-capped as Gemma 2 does, after the scale (cap 0: the score itself).
inline float soft_capped(float s, float cap) { return cap > 0.0f ? cap * std::tanh(s / cap) : s; }

}  // namespace jitllm
