// The olmo2 family (OLMo 2): no norm before the attention or the FFN; instead RMSNorms of q and k
// over the whole projection (before the heads are split), and norms of the attention and FFN
// outputs before their residuals (post_attention_norm, post_ffw_norm). NEOX rotation, SwiGLU.
#include "core/error.h"
#include "model/builder.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_olmo2_hparams(const Metadata&, Config& c) {
  c.rope_mode = RopeMode::Neox;
  if (c.head_dim_v != c.head_dim)
    throw_error("metadata: olmo2.attention.value_length {} differs from key_length {} (not supported)",
                c.head_dim_v, c.head_dim);
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

void build_olmo2_graph(GraphBuilder& b) {
  const Config& c = b.config();
  b.build_inp_embd();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    b.begin_layer(il);
    Act attn = b.build_attn(il, b.x(), l, b.attn_spec(il), c.rope_params_of(il));
    b.build_residual(il, *l.wo, attn, "attn_out", "ffn_inp", &l.attn_post_norm, "attn_post_norm");
    Act ffn = b.build_ffn(il, b.x(), l);
    b.build_residual(il, *l.ffn_down, ffn, "ffn_out", "l_out", &l.ffn_post_norm, "ffn_post_norm");
  }
}

}  // namespace

extern const Family kOlmo2Family{
    .name = "olmo2",
    .archs = {"olmo2"},
    .read_hparams = read_olmo2_hparams,
    .layer_tensors = {std::begin(kOlmo2Layer), std::end(kOlmo2Layer)},
    .build = build_olmo2_graph,
};

}  // namespace jitllm
