// The qwen3moe family (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (per-head q/k norms,
// NEOX rotation) over layers whose FFN is a mixture of experts: softmax over the router's
// logits, the top k, their weights renormalised to sum 1 (llama.cpp fixes the renormalisation
// for this architecture; a file's expert_weights_norm overrides it). No shared expert.
#include "model/family.h"

namespace jitllm {

namespace {

void read_qwen3moe_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
  // llama.cpp's default width when the key is absent: the dense width shared by the chosen.
  read_moe_hparams(md, c, c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0, true);
}

}  // namespace

extern const Family kQwen3MoeFamily{
    .name = "qwen3moe",
    .archs = {"qwen3moe"},
    .read_hparams = read_qwen3moe_hparams,
    .layer_tensors = with_moe_tensors(qwen3_layer_tensors()),
    .build = build_llama_graph,  // the experts come with the layer weights (builder.h)
};

}  // namespace jitllm
