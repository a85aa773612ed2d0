// DeepSeek-V2 / V3 from Hugging Face (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM): config.json
// -> "deepseek2.*" keys as llama.cpp's converter (conversion/deepseek.py) writes them, including
// its absorbed-MQA description of multi-head latent attention (1 KV head of kv_lora_rank +
// qk_rope_head_dim, V of kv_lora_rank; key/value_length_mla the decompressed heads), and tensor
// names: kv_b_proj split per head into attn_k_b (its qk_nope rows, transposed) and attn_v_b (its
// v_head_dim rows). V2 routes softmax over all experts, greedy or group-limited by each group's
// best (our key expert_group_score "max"); V3 sigmoid plus e_score_correction_bias over groups
// scored by their best two, as llama.cpp does. No row permutation: both rotate pairs (2i, 2i + 1),
// llama.cpp's NORM mode. Refused: attention_bias, V3's rope_interleave false, V2's
// norm_topk_prob (transformers' DeepseekV2 never renormalises), YaRN mscale pairs llama.cpp's rule
// cannot say, and MTP layers past num_hidden_layers.
#include <cmath>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void deepseek2_metadata(const nlohmann::json& c, Metadata& m) {
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  const std::string a = "deepseek2.";
  // V3's routing (Moonlight says model_type deepseek_v3, Kimi-K2 kimi_k2; both name the class).
  const std::string type_name = c.value("model_type", std::string());
  const bool v3 = type_name == "deepseek_v3" || type_name == "kimi_k2" ||
                  (c.contains("architectures") && c["architectures"].is_array() &&
                   !c["architectures"].empty() && c["architectures"][0] == "DeepseekV3ForCausalLM");
  if (config_bool_or(c, "attention_bias", false))
    throw_error("config.json: attention_bias is not supported for deepseek2");
  if (v3 && !config_bool_or(c, "rope_interleave", true))
    throw_error("config.json: rope_interleave false (rotate-half pairs) is not supported for "
                "deepseek2, which rotates adjacent pairs");
  const int64_t n_layer = config_hparam(c, "num_hidden_layers");
  const int64_t n_head = config_hparam(c, "num_attention_heads");
  const int64_t kv_rank = config_hparam(c, "kv_lora_rank");
  const int64_t rope = config_hparam(c, "qk_rope_head_dim");
  const int64_t nope = config_hparam(c, "qk_nope_head_dim");
  const int64_t v_head = config_hparam(c, "v_head_dim");
  m.set(a + "block_count", u32(n_layer));
  m.set(a + "context_length", u32(config_hparam(c, "max_position_embeddings")));
  m.set(a + "embedding_length", u32(config_hparam(c, "hidden_size")));
  m.set(a + "feed_forward_length", u32(config_hparam(c, "intermediate_size")));
  m.set(a + "attention.head_count", u32(n_head));
  m.set(a + "attention.head_count_kv", u32(1));
  m.set(a + "rope.freq_base", Value::f32(float(rope_theta(c))));
  m.set(a + "attention.layer_norm_rms_epsilon",
        Value::f32(float(config_number_opt(c, "rms_norm_eps").value_or(1e-6))));
  if (auto v = config_hparam_opt(c, "vocab_size")) m.set(a + "vocab_size", u32(*v));
  if (auto v = config_hparam_opt(c, "q_lora_rank")) m.set(a + "attention.q_lora_rank", u32(*v));
  m.set(a + "attention.kv_lora_rank", u32(kv_rank));
  m.set(a + "attention.key_length", u32(kv_rank + rope));
  m.set(a + "attention.value_length", u32(kv_rank));
  m.set(a + "attention.key_length_mla", u32(nope + rope));
  m.set(a + "attention.value_length_mla", u32(v_head));
  m.set(a + "rope.dimension_count", u32(rope));

  const std::optional<int64_t> n_expert = config_hparam_opt(c, "n_routed_experts");
  const int64_t dense = config_int_in_opt(c, "first_k_dense_replace", 0, n_layer).value_or(n_expert ? 0 : n_layer);
  m.set(a + "leading_dense_block_count", u32(dense));
  if (n_expert) {
    m.set(a + "expert_count", u32(*n_expert));
    m.set(a + "expert_used_count", u32(config_int_in(c, "num_experts_per_tok", 1, *n_expert)));
    m.set(a + "expert_feed_forward_length", u32(config_hparam(c, "moe_intermediate_size")));
    m.set(a + "expert_shared_count", u32(config_int_in_opt(c, "n_shared_experts", 0, 1024).value_or(0)));
    if (auto v = config_number_opt(c, "routed_scaling_factor"))
      m.set(a + "expert_weights_scale", Value::f32(float(*v)));
    const bool norm = config_bool_or(c, "norm_topk_prob", false);
    if (norm && !v3)
      throw_error("config.json: norm_topk_prob is true; transformers' DeepseekV2 does not "
                  "renormalise the chosen weights, so the reference is ambiguous (not supported)");
    if (norm) m.set(a + "expert_weights_norm", Value::boolean(true));
    const std::string scoring = c.value("scoring_func", std::string(v3 ? "sigmoid" : "softmax"));
    if (scoring != (v3 ? "sigmoid" : "softmax"))
      throw_error("config.json: scoring_func '{}' is not what transformers' {} runs", scoring,
                  v3 ? "DeepseekV3" : "DeepseekV2");
    m.set(a + "expert_gating_func", u32(v3 ? 2 : 1));
    const std::string method = c.value("topk_method", std::string("greedy"));
    const bool groups = v3 || method == "group_limited_greedy";
    if (!v3 && method != "greedy" && method != "group_limited_greedy")
      throw_error("config.json: topk_method '{}' is not supported for DeepseekV2 (greedy, "
                  "group_limited_greedy)",
                  method);
    if (groups) {
      const int64_t g = config_int_in_opt(c, "n_group", 1, *n_expert).value_or(1);
      if (g > 1) {
        m.set(a + "expert_group_count", u32(g));
        m.set(a + "expert_group_used_count", u32(config_int_in(c, "topk_group", 1, g)));
        if (!v3) m.set(a + "expert_group_score", Value::string("max"));
      }
    }
  }

  const std::string type = rope_type(c);
  if (type == "yarn") {
    const nlohmann::json& rp = *rope_parameters(c);
    const double factor = config_number_opt(rp, "factor").value_or(1.0);
    m.set(a + "rope.scaling.type", Value::string("yarn"));
    m.set(a + "rope.scaling.factor", Value::f32(float(factor)));
    if (auto v = config_hparam_opt(rp, "original_max_position_embeddings"))
      m.set(a + "rope.scaling.original_context_length", u32(*v));
    if (auto v = config_number_opt(rp, "beta_fast")) m.set(a + "rope.scaling.yarn_beta_fast", Value::f32(float(*v)));
    if (auto v = config_number_opt(rp, "beta_slow")) m.set(a + "rope.scaling.yarn_beta_slow", Value::f32(float(*v)));
    if (!config_bool_or(rp, "truncate", true))
      throw_error("config.json: rope truncate false is not supported for deepseek2");
    if (rp.contains("attention_factor") && !rp["attention_factor"].is_null())
      throw_error("config.json: rope attention_factor is set; deepseek2's comes from mscale and "
                  "mscale_all_dim");
    // llama.cpp reads mscale_all_dim only (as 0.1 x it, its converter's yarn_log_multiplier) and
    // takes mscale equal to it unless it is 1: another pair would scale differently from
    // transformers.
    const double mscale = config_number_opt(rp, "mscale").value_or(1.0);
    if (auto all = config_number_opt(rp, "mscale_all_dim")) {
      const double assumed = *all != 1.0 ? *all : 1.0;
      if (std::fabs(mscale - assumed) > 1e-6)
        throw_error("config.json: rope mscale {} with mscale_all_dim {} is not supported (llama.cpp "
                    "takes mscale = mscale_all_dim)",
                    mscale, *all);
      m.set(a + "rope.scaling.yarn_log_multiplier", Value::f32(float(0.1 * *all)));
    } else if (std::fabs(mscale - 1.0) > 1e-6) {
      throw_error("config.json: rope mscale {} without mscale_all_dim is not supported", mscale);
    }
  } else if (type != "default") {
    throw_error("config.json: rope type '{}' is not supported for deepseek2 (default, yarn)", type);
  }
}

const HfLayerTensor kDeepseek2Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
    {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
};

std::optional<HfTensorMapping> deepseek2_map_tensor(const std::string& name, const nlohmann::json& c) {
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    const std::string blk = "blk." + index + ".";
    if (std::stoll(index) >= config_hparam(c, "num_hidden_layers"))
      throw_error("tensor '{}': a layer past num_hidden_layers (multi-token prediction) is not "
                  "supported",
                  name);
    if (rest == "self_attn.kv_b_proj.weight") {
      // [n_head * (nope + v), kv_rank]: per head k_b's rows then v_b's.
      const int64_t heads = config_hparam(c, "num_attention_heads");
      const int64_t nope = config_hparam(c, "qk_nope_head_dim");
      HfTensorMapping k_b{blk + "attn_k_b.weight"};
      k_b.heads = heads;
      k_b.head_first = 0;
      k_b.head_rows = nope;
      k_b.transpose = true;  // [heads][kv_rank][nope]: q_nope -> latent
      HfTensorMapping v_b{blk + "attn_v_b.weight"};
      v_b.heads = heads;
      v_b.head_first = nope;
      v_b.head_rows = config_hparam(c, "v_head_dim");
      k_b.also.push_back(v_b);
      return k_b;
    }
    if (rest == "mlp.gate.e_score_correction_bias") {
      HfTensorMapping bias{blk + "exp_probs_b.bias"};
      bias.f32 = true;
      return bias;
    }
  }
  return map_tensor_with_experts(name, c, {kDeepseek2Layer}, "deepseek2");
}

}  // namespace

extern const HfArchitecture kHfDeepseek2{"deepseek2", deepseek2_metadata, deepseek2_map_tensor, nullptr};

}  // namespace jitllm
