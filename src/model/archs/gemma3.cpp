// The gemma3 family (Gemma 3 text): gemma2's layers (archs/gemma2.cpp) that also bind
// per-head q/k norms, without attention soft-capping; five sliding layers to one global by
// default (llama.cpp's period 6, or the file's sliding_window_pattern), the sliding layers with
// their own RoPE base (rope.freq_base_swa, default 10000) and no RoPE scaling, the global ones
// with the file's base and scaling (linear 8 on the 4B-27B). Final soft-capping only where the
// file has it.
#include <cmath>

#include "model/family.h"

namespace jitllm {

namespace {

void read_gemma3_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  c.embd_scale = std::sqrt(float(c.n_embd));
  c.ffn_gelu = true;
  read_sliding_window(md, c, 0, 6);
  c.rope_freq_base_swa = float(md.get_f64_or("gemma3.rope.freq_base_swa", 10000.0));
  c.rope_freq_scale_swa = 1.0f;
  c.final_softcap = float(md.get_f64_or("gemma3.final_logit_softcapping", 0.0));
  read_gemma_attention_scale(md, c, 62);
}

std::vector<LayerTensor> gemma3_layer_tensors() {
  std::vector<LayerTensor> t = gemma2_layer_tensors();
  t.push_back({"attn_q_norm.weight", &LayerWeights::attn_q_norm, shapes::head_dim});
  t.push_back({"attn_k_norm.weight", &LayerWeights::attn_k_norm, shapes::head_dim});
  return t;
}

}  // namespace

extern const Family kGemma3Family{
    .name = "gemma3",
    .archs = {"gemma3"},
    .read_hparams = read_gemma3_hparams,
    .layer_tensors = gemma3_layer_tensors(),
    .build = build_llama_graph,  // q/k and post-norms come with the layer weights (builder.h)
};

}  // namespace jitllm
