// The bert family (BERT, RoBERTa-shaped embedders such as bge, e5, all-MiniLM, and BERT
// cross-encoders): learned positions and token type 0 added to the token embeddings, then a
// LayerNorm; post-norm blocks of bidirectional attention (q/k/v/o with biases, no RoPE) and an
// ungated GELU FFN (erf, as transformers' BertIntermediate), each residual followed by a
// LayerNorm. No logits head: the step gives hidden states, pooled by the runtime (mean, cls,
// last) or scored by a cross-encoder's classification head. Tensor names as llama.cpp writes
// them for LLM_ARCH_BERT.
#include <iterator>

#include "core/error.h"
#include "model/builder.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_bert_hparams(const Metadata& md, Config& c) {
  require_equal_head_sizes(c);
  if (!md.has(c.arch + ".attention.layer_norm_epsilon"))
    throw_error("metadata key '{}.attention.layer_norm_epsilon' is missing", c.arch);
  if (c.n_expert > 0) throw_error("metadata: a {} model with experts is not supported", c.arch);
  // llama.cpp reads <arch>.attention.causal for BERT (default false for this architecture).
  c.causal = md.get_bool_or(c.arch + ".attention.causal", false);
}

constexpr LayerTensor kBertLayer[] = {  // in the order llama.cpp binds them
    {"attn_q.weight", &LayerWeights::wq, shapes::q},
    {"attn_q.bias", &LayerWeights::bq, shapes::q_dim},
    {"attn_k.weight", &LayerWeights::wk, shapes::k},
    {"attn_k.bias", &LayerWeights::bk, shapes::k_dim},
    {"attn_v.weight", &LayerWeights::wv, shapes::v},
    {"attn_v.bias", &LayerWeights::bv, shapes::v_dim},
    {"attn_output.weight", &LayerWeights::wo, shapes::o},
    {"attn_output.bias", &LayerWeights::bo, shapes::embd},
    {"attn_output_norm.weight", &LayerWeights::attn_out_norm, shapes::embd},
    {"attn_output_norm.bias", &LayerWeights::attn_out_norm_b, shapes::embd},
    {"ffn_up.weight", &LayerWeights::ffn_up, shapes::gate_up},
    {"ffn_up.bias", &LayerWeights::ffn_up_b, shapes::ff},
    {"ffn_down.weight", &LayerWeights::ffn_down, shapes::down},
    {"ffn_down.bias", &LayerWeights::ffn_down_b, shapes::embd},
    {"layer_output_norm.weight", &LayerWeights::layer_out_norm, shapes::embd},
    {"layer_output_norm.bias", &LayerWeights::layer_out_norm_b, shapes::embd},
};

void build_bert_graph(GraphBuilder& b) {
  const Config& c = b.config();
  b.build_inp_embd();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    b.begin_layer(il);
    const Act attn = b.build_attn(il, b.x(), l, b.attn_spec(il), c.rope_params_of(il));
    b.build_residual(il, *l.wo, attn, "attn_out", "ffn_inp", nullptr, nullptr, &l.bo);
    b.build_layer_norm(l.attn_out_norm, l.attn_out_norm_b, "attn_out_norm", il);
    const Act ffn = b.build_ffn_gelu(il, b.x(), l);
    b.build_residual(il, *l.ffn_down, ffn, "ffn_out", "ffn_sum", nullptr, nullptr, &l.ffn_down_b);
    b.build_layer_norm(l.layer_out_norm, l.layer_out_norm_b, "l_out", il);
  }
}

}  // namespace

extern const Family kBertFamily{
    .name = "bert",
    .archs = {"bert"},
    .read_hparams = read_bert_hparams,
    .layer_tensors = {std::begin(kBertLayer), std::end(kBertLayer)},
    .build = build_bert_graph,
    .learned_positions = true,
    .lm_head = false,
};

}  // namespace jitllm
