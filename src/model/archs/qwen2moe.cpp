// The qwen2moe family (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (q/k/v biases, NEOX
// rotation) over layers whose FFN is a mixture of experts: softmax over the router's logits, the
// top k with their probabilities as they are (no renormalisation), plus a shared expert that
// every row runs, scaled by sigmoid(x . ffn_gate_inp_shexp).
#include "model/family.h"

namespace jitllm {

namespace {

void read_qwen2moe_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
  read_moe_hparams(md, c, c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0, false);
  if (c.n_ff_shexp == 0) c.n_ff_shexp = c.n_ff;  // llama.cpp's default: the dense width
}

}  // namespace

extern const Family kQwen2MoeFamily{
    .name = "qwen2moe",
    .archs = {"qwen2moe"},
    .read_hparams = read_qwen2moe_hparams,
    .layer_tensors = with_moe_tensors(qwen2_layer_tensors()),
    .build = build_llama_graph,  // biases, experts and the shared expert come with the weights
};

}  // namespace jitllm
