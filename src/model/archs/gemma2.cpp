// The gemma2 family (Gemma 2): Gemma's embedding scale, GeGLU and NEOX rotation, plus norms after
// the attention and the FFN (post_attention_norm, post_ffw_norm) before their residuals,
// attention logit soft-capping, final logit soft-capping, and sliding-window attention on every
// other layer (layer 0 slides). Defaults are llama.cpp's (window 4096, period 2, caps 50 / 30,
// scale 1/sqrt(head_dim) but 1/sqrt(n_embd / n_head) for the 46-layer 27B); the file's keys,
// including our converter's attention.scale (from query_pre_attn_scalar), override them.
#include <cmath>

#include "core/error.h"
#include "model/builder.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_gemma2_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  c.embd_scale = std::sqrt(float(c.n_embd));
  c.ffn_gelu = true;
  read_sliding_window(md, c, 4096, 2);
  c.attn_softcap = float(md.get_f64_or("gemma2.attn_logit_softcapping", 50.0));
  c.final_softcap = float(md.get_f64_or("gemma2.final_logit_softcapping", 30.0));
  c.rope_freq_base_swa = float(md.get_f64_or("gemma2.rope.freq_base_swa", 0.0));
  read_gemma_attention_scale(md, c, 46);
}

}  // namespace

void read_gemma_attention_scale(const Metadata& md, Config& c, int n_layer_27b) {
  if (c.head_dim_v != c.head_dim)
    throw_error("metadata: {}.attention.value_length {} differs from key_length {} (not supported)",
                c.arch, c.head_dim_v, c.head_dim);
  const std::string key = c.arch + ".attention.scale";
  if (md.has(key)) {
    c.attn_scale = float(md.get_f64(key));
    if (!(c.attn_scale > 0.0f) || !std::isfinite(c.attn_scale))
      throw_error("metadata key '{}': {} is not a positive scale", key, c.attn_scale);
  } else {
    c.attn_scale = c.n_layer == n_layer_27b ? 1.0f / std::sqrt(float(c.n_embd / c.n_head))
                                            : 1.0f / std::sqrt(float(c.head_dim));
  }
}

std::vector<LayerTensor> gemma2_layer_tensors() {
  std::vector<LayerTensor> t = llama_layer_tensors();
  t.push_back({"post_attention_norm.weight", &LayerWeights::attn_post_norm, shapes::embd});
  t.push_back({"post_ffw_norm.weight", &LayerWeights::ffn_post_norm, shapes::embd});
  return t;
}

void build_gemma2_graph(GraphBuilder& b) {
  const Config& c = b.config();
  b.build_inp_embd();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    b.begin_layer(il);
    Act cur = b.build_norm(l.attn_norm, "attn_norm", il);
    Act attn = b.build_attn(il, cur, l, b.attn_spec(il), c.rope_params_of(il));
    b.build_residual(il, *l.wo, attn, "attn_out", "sa_out", &l.attn_post_norm, "attn_post_norm");
    cur = b.build_norm(l.ffn_norm, "ffn_norm", il);
    Act ffn = b.build_ffn(il, cur, l);
    b.build_residual(il, *l.ffn_down, ffn, "ffn_out", "l_out", &l.ffn_post_norm, "ffn_post_norm");
  }
}

extern const Family kGemma2Family{
    .name = "gemma2",
    .archs = {"gemma2"},
    .read_hparams = read_gemma2_hparams,
    .layer_tensors = gemma2_layer_tensors(),
    .build = build_gemma2_graph,
};

}  // namespace jitllm
