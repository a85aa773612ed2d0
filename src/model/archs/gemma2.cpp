// The gemma2 family (Gemma 2): Gemma's embedding scale, GeGLU and NEOX rotation, plus norms after
// the attention and the FFN (post_attention_norm, post_ffw_norm) before their residuals,
// attention logit soft-capping, final logit soft-capping, and sliding-window attention on every
// other layer (layer 0 slides). Defaults are llama.cpp's (window 4096, period 2, caps 50 / 30,
// scale 1/sqrt(head_dim) but 1/sqrt(n_embd / n_head) for the 46-layer 27B); the file's keys,
// including our converter's attention.scale (from query_pre_attn_scalar), override them.
#include <cmath>

#include "core/error.h"
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
  require_equal_head_sizes(c);
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

extern const Family kGemma2Family{
    .name = "gemma2",
    .archs = {"gemma2"},
    .read_hparams = read_gemma2_hparams,
    .layer_tensors = gemma2_layer_tensors(),
    .build = build_llama_graph,  // the post-norms come with the layer weights (builder.h)
};

}  // namespace jitllm
