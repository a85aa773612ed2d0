// The lfm2 family (Liquid's LFM2-350M ... 2.6B): a hybrid of short-convolution layers and GQA
// attention layers (those with KV heads; <arch>.attention.head_count_kv is 0 on the others),
// every layer with an RMS pre-norm ("operator_norm") and a SwiGLU FFN behind its own norm.
// Attention layers: per-head q/k RMSNorm, NEOX RoPE. Convolution layers: B, C, x from one
// projection, C * conv(B * x) with a depthwise causal kernel of shortconv.l_cache taps, then
// out_proj. The convolution's state is its input rows, kept per position beside the KV (f32, as
// llama.cpp keeps it), so forks, truncation and prefix reuse carry it like KV. The final norm is
// token_embd_norm.weight in GGUF (llama.cpp's name). Tensor names as llama.cpp's.
#include <iterator>

#include "core/error.h"
#include "model/builder.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_lfm2_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
  const std::string key = c.arch + ".shortconv.l_cache";
  const int64_t taps = md.get_i64(key);
  if (taps < 2 || taps > 64) throw_error("metadata key '{}': {} taps is out of range [2, 64]", key, taps);
  c.shortconv_l_cache = int(taps);
  if (c.n_expert > 0) throw_error("metadata: {} with experts (LFM2-MoE) is not supported", c.arch);
}

LayerKv lfm2_layer_memory(const Config& c, int il) {
  if (c.is_recurrent(il)) return LayerKv{c.n_embd, 0, true};  // the convolution's input rows
  return LayerKv{c.k_dim_of(il), c.v_dim_of(il)};
}

constexpr LayerTensor kLfm2Layer[] = {  // in the order llama.cpp binds them
    {"ffn_norm.weight", &LayerWeights::ffn_norm, shapes::embd},
    {"ffn_gate.weight", &LayerWeights::ffn_gate, shapes::gate_up},
    {"ffn_down.weight", &LayerWeights::ffn_down, shapes::down},
    {"ffn_up.weight", &LayerWeights::ffn_up, shapes::gate_up},
    {"attn_norm.weight", &LayerWeights::attn_norm, shapes::embd},
    {"attn_q_norm.weight", &LayerWeights::attn_q_norm, shapes::head_dim, true},
    {"attn_k_norm.weight", &LayerWeights::attn_k_norm, shapes::head_dim, true},
    {"attn_q.weight", &LayerWeights::wq, shapes::q, true},
    {"attn_k.weight", &LayerWeights::wk, shapes::k, true},
    {"attn_v.weight", &LayerWeights::wv, shapes::v, true},
    {"attn_output.weight", &LayerWeights::wo, shapes::o, true},
    {"shortconv.conv.weight", &LayerWeights::shortconv_conv, shapes::conv_kernel, true},
    {"shortconv.in_proj.weight", &LayerWeights::shortconv_in, shapes::conv_in, true},
    {"shortconv.out_proj.weight", &LayerWeights::shortconv_out, shapes::embd_square, true},
};

void build_lfm2_graph(GraphBuilder& b) {
  const Config& c = b.config();
  b.build_inp_embd();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    b.begin_layer(il);
    Act cur = b.build_norm(l.attn_norm, "attn_norm", il);
    if (c.is_recurrent(il)) {
      const Act y = b.build_short_conv(il, cur, l);
      b.build_residual(il, *l.shortconv_out, y, "shortconv_out", "ffn_inp");
    } else {
      const Act attn = b.build_attn(il, cur, l, b.attn_spec(il), c.rope_params_of(il));
      b.build_residual(il, *l.wo, attn, "attn_out", "ffn_inp");
    }
    b.build_ffn_block(il, l);
  }
}

}  // namespace

extern const Family kLfm2Family{
    .name = "lfm2",
    .archs = {"lfm2"},
    .read_hparams = read_lfm2_hparams,
    .layer_tensors = {std::begin(kLfm2Layer), std::end(kLfm2Layer)},
    .layer_memory = lfm2_layer_memory,
    .build = build_lfm2_graph,
    .recurrent_layers = true,
    .output_norm_name = "token_embd_norm.weight",
};

}  // namespace jitllm
