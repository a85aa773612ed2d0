// The olmoe family (OLMoE-1B-7B): llama's pre-norm blocks with RMSNorms of q and k over the whole
// projection (as OLMo2) and NEOX rotation, over layers whose FFN is a mixture of experts of the
// file's feed_forward_length: softmax over the router's logits, the top k with their
// probabilities as they are (no renormalisation).
#include "model/family.h"

namespace jitllm {

namespace {

void read_olmoe_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
  read_moe_hparams(md, c, c.n_ff, false);
}

std::vector<LayerTensor> olmoe_layer_tensors() {
  std::vector<LayerTensor> t = llama_layer_tensors();
  t.push_back({"attn_q_norm.weight", &LayerWeights::attn_q_norm, shapes::q_dim});
  t.push_back({"attn_k_norm.weight", &LayerWeights::attn_k_norm, shapes::k_dim});
  return with_moe_tensors(std::move(t));
}

}  // namespace

extern const Family kOlmoeFamily{
    .name = "olmoe",
    .archs = {"olmoe"},
    .read_hparams = read_olmoe_hparams,
    .layer_tensors = olmoe_layer_tensors(),
    .build = build_llama_graph,  // q/k norms and experts come with the layer weights
};

}  // namespace jitllm
