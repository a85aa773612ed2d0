// The olmo2 family (OLMo 2): no norm before the attention or the FFN; instead RMSNorms of q and k
// over the whole projection (before the heads are split), and norms of the attention and FFN
// outputs before their residuals (post_attention_norm, post_ffw_norm). NEOX rotation, SwiGLU.
#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_olmo2_hparams(const Metadata&, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
}

constexpr LayerTensor kOlmo2Layer[] = {  // in the order llama.cpp binds them
    {"attn_q.weight", &LayerWeights::wq, shapes::q},
    {"attn_k.weight", &LayerWeights::wk, shapes::k},
    {"attn_v.weight", &LayerWeights::wv, shapes::v},
    {"attn_output.weight", &LayerWeights::wo, shapes::o},
    {"attn_q_norm.weight", &LayerWeights::attn_q_norm, shapes::q_dim},
    {"attn_k_norm.weight", &LayerWeights::attn_k_norm, shapes::k_dim},
    {"post_attention_norm.weight", &LayerWeights::attn_post_norm, shapes::embd},
    {"ffn_gate.weight", &LayerWeights::ffn_gate, shapes::gate_up},
    {"ffn_up.weight", &LayerWeights::ffn_up, shapes::gate_up},
    {"ffn_down.weight", &LayerWeights::ffn_down, shapes::down},
    {"post_ffw_norm.weight", &LayerWeights::ffn_post_norm, shapes::embd},
};

}  // namespace

extern const Family kOlmo2Family{
    .name = "olmo2",
    .archs = {"olmo2"},
    .read_hparams = read_olmo2_hparams,
    .layer_tensors = {std::begin(kOlmo2Layer), std::end(kOlmo2Layer)},
    .build = build_llama_graph,  // no pre-norms bound: build_norm passes x through
};

}  // namespace jitllm
