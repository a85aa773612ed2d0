// The qwen2 family (Qwen2, Qwen2.5 dense): the llama graph (archs/llama.cpp) over layers that also
// bind biases of the q, k and v projections (the builder adds them after the products), NEOX
// rotation (pairs (i, i + n_rot/2)), often tied embeddings. Tensor names are llama.cpp's.
#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_qwen2_hparams(const Metadata&, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
}

}  // namespace

// llama's, and the projection biases.
std::vector<LayerTensor> qwen2_layer_tensors() {
  std::vector<LayerTensor> t = llama_layer_tensors();
  t.push_back({"attn_q.bias", &LayerWeights::bq, shapes::q_dim});
  t.push_back({"attn_k.bias", &LayerWeights::bk, shapes::k_dim});
  t.push_back({"attn_v.bias", &LayerWeights::bv, shapes::v_dim});
  return t;
}

extern const Family kQwen2Family{
    .name = "qwen2",
    .archs = {"qwen2"},
    .read_hparams = read_qwen2_hparams,
    .layer_tensors = qwen2_layer_tensors(),
    .build = build_llama_graph,  // the biases come with the layer weights (builder.h)
};

}  // namespace jitllm
