// What a mixture-of-experts FFN is asked to compute, for every MoE family: the router's gating
// (how its logits become the chosen experts and their weights), the experts' matrices one by one,
// an optional shared expert, and the scratch the builder sizes once per step. The routing has a
// host twin here (route_experts) that every backend's routing is checked against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graph/act.h"
#include "io/tensor_info.h"

namespace jitllm {

// How router logits become probabilities (llama.cpp's expert_gating_func).
enum class MoeGating {
  Softmax,        // softmax over every expert, then the top k (Mixtral, Qwen2/3-MoE, OLMoE)
  SoftmaxChosen,  // the top k of the logits, softmax over those k (gpt-oss)
  Sigmoid,        // sigmoid of every logit, then the top k (DeepSeek-V3, Kimi-K2, Moonlight)
};

// How a group of experts is scored when the choice is limited to the best groups.
enum class MoeGroupScore {
  Top2Sum,  // the sum of its two best selection scores (llama.cpp, DeepSeek-V3)
  Max,      // its best one (DeepSeek-V2's group_limited_greedy in transformers)
};

struct MoeRouting {
  int n_expert = 0;          // experts per layer
  int n_used = 0;            // experts each row runs (top k)
  MoeGating gating = MoeGating::Softmax;
  bool norm_weights = false;  // the k chosen weights divided by their sum (Mixtral, Qwen3-MoE)
  float weights_scale = 0.0f; // the chosen weights times this; 0 or 1: none
  // Group-limited choice (DeepSeek): the experts in n_group equal groups, only those of the
  // n_group_used best groups chosen. n_group <= 1: no groups.
  int n_group = 0, n_group_used = 0;
  MoeGroupScore group_score = MoeGroupScore::Top2Sum;
  // [n_expert] added to the probabilities for the choice only, the weights stay unbiased
  // (DeepSeek-V3's exp_probs_b); null: none.
  const float* selection_bias = nullptr;
  // True when the choice is the top k of the logits themselves (softmax or softmax over the
  // chosen, no bias, no groups): the routing a backend's fused kernel may implement.
  bool plain_choice() const {
    return gating != MoeGating::Sigmoid && n_group <= 1 && selection_bias == nullptr;
  }
};

// For each of `rows` rows of router logits ([rows, n_expert]): the n_used experts of highest
// selection score (the probability, plus the selection bias where there is one, within the
// kept groups where the choice is group-limited), highest first (ties: the lower expert id), into
// ids [rows, n_used], and their weights after gating, normalisation and scale into weights
// [rows, n_used]. A row holding NaN is not ordered (its choice is unspecified but in range).
void route_experts(const float* logits, int64_t rows, const MoeRouting& r, int32_t* ids,
                   float* weights);

// One expert's three matrices as the matmul ops take them.
struct ExpertMatrices {
  const TensorInfo* gate = nullptr;  // [n_embd, n_ff_exp]
  const TensorInfo* up = nullptr;    // [n_embd, n_ff_exp]
  const TensorInfo* down = nullptr;  // [n_ff_exp, n_embd]
};

// Experts that are not all in memory (runtime/expert_cache.h pages them from the model file
// under a host budget). A step asks for the experts its router chose, at most capacity() at a
// time, and runs each as soon as its pages are in; the matrices stay valid until release().
// Their TensorInfo::transient is set: the bytes live in a reused buffer, so a backend keeps
// nothing keyed by their address.
class ExpertPages {
 public:
  virtual ~ExpertPages() = default;
  // Most experts one fetch may hold at once.
  virtual int capacity() const = 0;
  // Starts bringing in experts `ids` of layer il (distinct, at most capacity()); returns at once.
  virtual void fetch(int il, std::span<const int32_t> ids) = 0;
  // Waits until expert `id` of the last fetch is in (and its checksums hold) and returns it.
  // Throws jitllm::Error naming the tensor and the expert when its pages cannot be read or are
  // damaged.
  virtual ExpertMatrices wait(int il, int32_t id) = 0;
  // The next expert of the last fetch not handed out yet, whichever is in first (those found
  // in memory before any being read), as wait() returns it; *id says which. The fetch's
  // experts are handed out once each, then this throws.
  virtual ExpertMatrices next(int il, int32_t* id) = 0;
  // Ends the fetch: its experts may be evicted from now on (reads still in flight are drained).
  virtual void release() noexcept = 0;
};

// One layer's experts as matrices the matmul ops take, each expert's a view of its stacked
// tensor (model/weights.h binds them), and the optional shared expert that every row runs.
struct MoeExperts {
  const TensorInfo* router = nullptr;    // [n_embd, n_expert]
  std::span<const TensorInfo> gate;      // [n_expert] x [n_embd, n_ff_exp]
  std::span<const TensorInfo> up;        // [n_expert] x [n_embd, n_ff_exp]
  std::span<const TensorInfo> down;      // [n_expert] x [n_ff_exp, n_embd]
  // Shared expert (Qwen2-MoE): a gated FFN over every row, times sigmoid(x . shared_gate) when
  // shared_gate is set (a [n_embd, 1] matrix). All null when the layer has none.
  const TensorInfo* shared_gate = nullptr;
  const TensorInfo* shared_ffn_gate = nullptr;  // [n_embd, n_ff_shexp]
  const TensorInfo* shared_ffn_up = nullptr;    // [n_embd, n_ff_shexp]
  const TensorInfo* shared_ffn_down = nullptr;  // [n_ff_shexp, n_embd]
  bool has_shared() const { return shared_ffn_down != nullptr; }
  // gpt-oss: the router's bias [n_expert] added to its logits before the choice, each expert's
  // biases ([n_expert] x [n_ff_exp] gate and up, x [n_embd] down), and its clamped SwiGLU
  // (swiglu_limit > 0, Ops::swiglu_oai). Null / empty / 0: none, and the plain SiLU gate.
  const std::vector<float>* router_bias = nullptr;
  std::span<const std::vector<float>> gate_bias, up_bias, down_bias;
  float swiglu_limit = 0.0f;
  // Set when the experts are paged (the views in gate/up/down must not be read then): where
  // they come from, and this layer's index there.
  ExpertPages* pages = nullptr;
  int layer = -1;
  ExpertMatrices matrices(int e) const {
    return {&gate[size_t(e)], &up[size_t(e)], &down[size_t(e)]};
  }
  // What Ops::moe_ffn's fused backends do not implement: the default twin runs it.
  bool has_extras() const {
    return router_bias || !gate_bias.empty() || !up_bias.empty() || !down_bias.empty() ||
           swiglu_limit > 0.0f;
  }
};

// gpt-oss's SwiGLU constant (transformers' GptOssExperts.alpha, llama.cpp's swiglu_oai alpha).
inline constexpr float kSwigluOaiAlpha = 1.702f;

// Rows past the last (row, expert) pair that xs, gate and up hold: a backend's expert matvecs
// over tiles of rows may read that far past the last pair (CUDA's grouped matvecs: up to 7).
inline constexpr int64_t kMoeTileRows = 8;

// Step scratch for moe_ffn on the backend that runs it (graph/ops.h), n = the step's rows,
// k = n_used, s = 1 with a shared expert else 0.
struct MoeScratch {
  Act logits;      // [n, n_expert] router logits
  Act xs;          // [n * k + kMoeTileRows, n_embd] the rows gathered in expert order
  Act gate, up;    // [n * k + kMoeTileRows, n_ff_exp] each
  Act ys;          // [n * (k + s), n_embd] each chosen expert's output, then the shared one's
  Act shared_gate; // [n, 1] when there is a shared gate
  Act sgate, sup;  // [n, n_ff_shexp] the shared expert's gate and up products
};

class Ops;

// Expert e of `w` (its matrices m) over its rows as the plain twin runs it: the gate and up
// products (with the experts' biases and activation: SiLU, or gpt-oss's clamped SwiGLU), then
// the down product and its bias. x [rows, n_embd] -> y [rows, n_embd]; gate and up
// [rows, n_ff_exp] scratch.
void run_expert(Ops& ops, const MoeExperts& w, int e, const ExpertMatrices& m, Act x, Act gate,
                Act up, Act y);

// The host side of the plain twin: the rows of a step grouped by expert. For n rows choosing k
// experts each, `order` lists the (row, slot) pairs expert by expert (row = order[i] / k), the
// rows of expert e at [offset[e], offset[e + 1]); `where[row * k + slot]` is that pair's index
// in `order`.
struct ExpertGroups {
  std::vector<int32_t> order;   // [n * k] row * k + slot, grouped by expert
  std::vector<int32_t> offset;  // [n_expert + 1]
  std::vector<int32_t> where;   // [n * k]
};
ExpertGroups group_by_expert(std::span<const int32_t> ids, int64_t rows, int n_used, int n_expert);

}  // namespace jitllm
