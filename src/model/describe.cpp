// describe_family (see describe.h).
#include "model/describe.h"

#include <cmath>
#include <fmt/format.h>

#include "model/family.h"
#include "model/weights.h"

namespace jitllm {

namespace {

const LayerTensor* bound(const Family& f, const char* name) {
  for (const LayerTensor& t : f.layer_tensors)
    if (std::string(t.name) == name) return &t;
  return nullptr;
}

bool binds(const Family& f, const char* name) { return bound(f, name) != nullptr; }

}  // namespace

FamilyDescription describe_family(const Config& c) {
  FamilyDescription d;
  d.family = c.family ? c.family->name : c.arch;
  auto& q = d.quirks;
  // MLA's head_dim / n_head_kv describe the absorbed MQA over the latent (said below instead).
  if (!c.is_mla()) {
    if (c.head_dim * c.n_head != c.n_embd) q.push_back(fmt::format("head size {} of its own", c.head_dim));
    if (c.n_head_kv != c.n_head) q.push_back(fmt::format("GQA {} query heads on {} KV heads", c.n_head, c.n_head_kv));
    if (c.n_rot != c.head_dim && c.n_rot > 0) q.push_back(fmt::format("partial rotary ({} of {} dims)", c.n_rot, c.head_dim));
  }
  if (c.family && !c.family->lm_head)
    q.push_back(fmt::format("encoder: {} attention, LayerNorm after each residual, GELU FFN, "
                            "{} pooling", c.causal ? "causal" : "bidirectional", pooling_name(c.pooling)));
  if (c.shortconv_l_cache > 0) {
    int conv = 0;
    for (int il = 0; il < c.n_layer; ++il) conv += c.is_recurrent(il);
    q.push_back(fmt::format("short convolutions ({} taps) on {} of {} layers, their state kept "
                            "per position in f32", c.shortconv_l_cache, conv, c.n_layer));
  }
  if (c.n_rot == 0) q.push_back("learned positions (no RoPE)");
  else if (c.rope_mode == RopeMode::Neox) q.push_back("NEOX rotation");
  if (c.rope_scaling != "none") q.push_back("RoPE scaling " + c.rope_scaling);
  if (!c.rope_freq_factors_long.empty())
    q.push_back(fmt::format("LongRoPE (short factors up to {} positions)", c.rope_ctx_orig));
  if (c.n_swa > 0) {
    int sliding = 0;
    for (int il = 0; il < c.n_layer; ++il) sliding += c.is_swa(il);
    std::string s = fmt::format("sliding window {} on {} of {} layers", c.n_swa, sliding, c.n_layer);
    if (c.rope_freq_base_swa > 0 && c.rope_freq_base_swa != c.rope_freq_base)
      s += fmt::format(" (RoPE base {:g} there)", c.rope_freq_base_swa);
    q.push_back(s);
  }
  const int scored_dim = c.is_mla() ? c.head_dim_k_mla : c.head_dim;
  if (c.attn_scale > 0 && std::fabs(c.attn_scale * std::sqrt(float(scored_dim)) - 1.0f) > 1e-6f)
    q.push_back(fmt::format("attention scale {:g}", c.attn_scale));
  if (c.attn_softcap > 0) q.push_back(fmt::format("attention soft-cap {:g}", c.attn_softcap));
  if (c.final_softcap > 0) q.push_back(fmt::format("final logit soft-cap {:g}", c.final_softcap));
  if (c.embd_scale != 0) q.push_back(fmt::format("embeddings x {:g}", c.embd_scale));
  if (c.ffn_gelu) q.push_back("GELU-tanh gated FFN");
  if (c.n_expert > 0) {
    std::string s = fmt::format("{} of {} experts a token (width {}), ", c.n_expert_used, c.n_expert,
                                c.n_ff_exp);
    s += c.expert_gating == MoeGating::Softmax   ? "softmax then top-k"
         : c.expert_gating == MoeGating::Sigmoid ? "sigmoid then top-k"
                                                 : "top-k then softmax";
    if (c.n_expert_groups > 1)
      s += fmt::format(" within the best {} of {} groups ({})", c.n_group_used, c.n_expert_groups,
                       c.expert_group_score == MoeGroupScore::Max ? "by their best" : "by their best two");
    if (c.expert_weights_norm) s += ", weights renormalised";
    if (c.expert_weights_scale != 0 && c.expert_weights_scale != 1)
      s += fmt::format(", weights x {:g}", c.expert_weights_scale);
    q.push_back(s);
    if (c.n_ff_shexp > 0) q.push_back(fmt::format("shared expert of width {}", c.n_ff_shexp));
    if (c.expert_swiglu_limit > 0)
      q.push_back(fmt::format("clamped SwiGLU experts (limit {:g})", c.expert_swiglu_limit));
  }
  if (c.is_mla()) {
    std::string s = fmt::format("multi-head latent attention: {} heads of {} (q/k, {} rotated) and {} "
                                "(v) from a cached latent of {}",
                                c.n_head, c.head_dim_k_mla, c.n_rot, c.head_dim_v_mla, c.n_lora_kv);
    if (c.n_lora_q > 0) s += fmt::format(", q through a LoRA of {}", c.n_lora_q);
    q.push_back(s);
  }
  if (c.n_layer_dense_lead > 0 && c.n_expert > 0)
    q.push_back(fmt::format("first {} layers dense", c.n_layer_dense_lead));
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerKv kv = c.family && c.family->layer_memory ? c.family->layer_memory(c, il)
                                                          : LayerKv{c.k_dim_of(il), c.v_dim_of(il)};
    d.kv_values_per_token += int64_t(kv.k_dim) + kv.v_dim;
  }
  if (c.family) {
    const Family& f = *c.family;
    if (binds(f, "attn_q.bias")) q.push_back(binds(f, "attn_output.bias") ? "q/k/v/o biases" : "q/k/v biases");
    if (binds(f, "ffn_gate_inp.bias")) q.push_back("router and expert biases");
    if (binds(f, "attn_sinks.weight")) q.push_back("attention sinks");
    if (binds(f, "attn_qkv.weight")) q.push_back("fused q/k/v and gate/up projections");
    if (const LayerTensor* qn = bound(f, "attn_q_norm.weight"))  // its shape says per head or not
      q.push_back(qn->shape == &shapes::head_dim ? "per-head q/k norms"
                                                 : "q/k norms over the whole projection");
    const LayerTensor* post = bound(f, "post_attention_norm.weight");  // gpt-oss: the FFN's pre-norm
    if (post && std::get_if<std::vector<float> LayerWeights::*>(&post->slot) &&
        *std::get_if<std::vector<float> LayerWeights::*>(&post->slot) == &LayerWeights::attn_post_norm)
      q.push_back("post-attention and post-FFN norms");
    if (!binds(f, "attn_norm.weight") && !binds(f, "attn_qkv.weight") && f.lm_head) q.push_back("no pre-norms");
  }
  return d;
}

}  // namespace jitllm
