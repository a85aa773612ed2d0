// The phi3 family (Phi-3, Phi-3.5, Phi-4, Phi-4-mini): the llama graph (archs/llama.cpp) over
// fused projections (attn_qkv holds q, k and v; ffn_up holds the gate then the up half), NEOX
// rotation of the first rope.dimension_count dims (Phi-4-mini rotates 3/4 of each head), and
// LongRoPE's short factors (rope_factors_short.weight) with its magnitude factor
// (rope.scaling.attn_factor). Like llama.cpp, the sliding window some configs carry is not
// applied.
#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_phi3_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
  c.yarn_attn_factor *= float(md.get_f64_or("phi3.rope.scaling.attn_factor", 1.0));
}

constexpr LayerTensor kPhi3Layer[] = {  // in the order llama.cpp binds them
    {"attn_norm.weight", &LayerWeights::attn_norm, shapes::embd},
    {"attn_qkv.weight", &LayerWeights::wqkv, shapes::qkv, true},
    {"attn_q.weight", &LayerWeights::wq, shapes::q, true},
    {"attn_k.weight", &LayerWeights::wk, shapes::k, true},
    {"attn_v.weight", &LayerWeights::wv, shapes::v, true},
    {"attn_output.weight", &LayerWeights::wo, shapes::o},
    {"ffn_norm.weight", &LayerWeights::ffn_norm, shapes::embd},
    {"ffn_down.weight", &LayerWeights::ffn_down, shapes::down},
    {"ffn_up.weight", &LayerWeights::ffn_up, shapes::gate_up_fused},
};

}  // namespace

extern const Family kPhi3Family{
    .name = "phi3",
    .archs = {"phi3"},
    .read_hparams = read_phi3_hparams,
    .layer_tensors = {std::begin(kPhi3Layer), std::end(kPhi3Layer)},
    .build = build_llama_graph,  // the fused projections come with the layer weights (builder.h)
};

}  // namespace jitllm
