// The qwen3 family (Qwen3 dense): the llama graph (archs/llama.cpp) over layers that also bind a
// per-head RMSNorm of q and k (GraphBuilder::build_attn applies them before RoPE), NEOX rotation
// (pairs (i, i + n_rot/2)), a head size of its own (attention.key_length), usually tied
// embeddings. Tensor and intermediate names are llama.cpp's.
#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_qwen3_hparams(const Metadata&, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
}

}  // namespace

// llama's, and the per-head norms.
std::vector<LayerTensor> qwen3_layer_tensors() {
  std::vector<LayerTensor> t = llama_layer_tensors();
  t.push_back({"attn_q_norm.weight", &LayerWeights::attn_q_norm, shapes::head_dim});
  t.push_back({"attn_k_norm.weight", &LayerWeights::attn_k_norm, shapes::head_dim});
  return t;
}

extern const Family kQwen3Family{
    .name = "qwen3",
    .archs = {"qwen3"},
    .read_hparams = read_qwen3_hparams,
    .layer_tensors = qwen3_layer_tensors(),
    .build = build_llama_graph,  // the q/k norms come with the layer weights (builder.h)
};

}  // namespace jitllm
