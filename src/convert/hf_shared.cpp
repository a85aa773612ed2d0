// What the llama-shaped HF families share (see hf_arch.h): the hyperparameter keys as llama.cpp's
// converter writes them, the model-wide tensor names, and the per-layer name tables of the
// families that need no row permutation.
#include <cmath>
#include <functional>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {

std::optional<std::optional<HfTensorMapping>> map_model_wide_tensor(const std::string& name,
                                                                    const nlohmann::json& c) {
  if (name == "model.embed_tokens.weight") return HfTensorMapping{"token_embd.weight"};
  if (name == "model.norm.weight") return HfTensorMapping{"output_norm.weight"};
  if (name == "lm_head.weight") {
    // Tied checkpoints sometimes still store lm_head; GGUF then has no output tensor.
    if (config_bool_or(c, "tie_word_embeddings", false)) return std::optional<HfTensorMapping>{};
    return HfTensorMapping{"output.weight"};
  }
  return std::nullopt;
}

bool split_layer_tensor(const std::string& name, std::string& index, std::string& rest) {
  // Decoders' layers, and encoders' (BERT, with the "bert." of its task models or without).
  std::string prefix;
  for (const char* p : {"model.layers.", "encoder.layer.", "bert.encoder.layer."})
    if (name.starts_with(p)) prefix = p;
  if (prefix.empty()) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return false;
  index = name.substr(prefix.size(), dot - prefix.size());
  rest = name.substr(dot + 1);
  return !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
}

namespace {

const HfLayerTensor kProjections[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

}  // namespace

const std::span<const HfLayerTensor> kLlamaProjections(kProjections);

std::optional<HfTensorMapping> map_tensor_by_table(
    const std::string& name, const nlohmann::json& c,
    std::initializer_list<std::span<const HfLayerTensor>> tables, const char* arch) {
  if (auto shared = map_model_wide_tensor(name, c)) return *shared;
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    for (std::span<const HfLayerTensor> table : tables)
      for (const HfLayerTensor& e : table)
        if (rest == e.hf) return HfTensorMapping{"blk." + index + "." + e.gguf};
    if (rest == "self_attn.rotary_emb.inv_freq") return std::nullopt;  // recomputed from theta
  }
  throw_error("tensor '{}' is not part of the {} architecture as jitllm knows it", name, arch);
}

std::optional<HfTensorMapping> map_tensor_with_experts(
    const std::string& name, const nlohmann::json& c,
    std::initializer_list<std::span<const HfLayerTensor>> tables, const char* arch) {
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    const std::string blk = "blk." + index + ".";
    HfTensorMapping router;
    router.f32 = true;
    if (rest == "mlp.gate.weight") {
      router.gguf_name = blk + "ffn_gate_inp.weight";
      return router;
    }
    if (rest == "mlp.shared_expert_gate.weight") {
      router.gguf_name = blk + "ffn_gate_inp_shexp.weight";
      return router;
    }
    for (const char* w : {"gate", "up", "down"})
      if (rest == std::string("mlp.shared_expert.") + w + "_proj.weight")
        return HfTensorMapping{blk + "ffn_" + w + "_shexp.weight"};
    // mlp.experts.E.{gate,up,down}_proj.weight -> slice E of the stacked ffn_*_exps.weight.
    const std::string experts = "mlp.experts.";
    if (rest.starts_with(experts)) {
      const size_t dot = rest.find('.', experts.size());
      const std::string e = rest.substr(experts.size(), dot == std::string::npos ? 0 : dot - experts.size());
      const std::string w = dot == std::string::npos ? "" : rest.substr(dot + 1);
      if (!e.empty() && e.size() < 6 && e.find_first_not_of("0123456789") == std::string::npos)
        for (const char* p : {"gate", "up", "down"})
          if (w == std::string(p) + "_proj.weight")
            return HfTensorMapping{blk + "ffn_" + p + "_exps.weight", 0, int32_t(std::stoi(e))};
    }
  }
  return map_tensor_by_table(name, c, tables, arch);
}

// Which layers attend through the sliding window: config.json's layer_types when it has them,
// else HF's default rule for the family.
std::vector<bool> sliding_layers(const nlohmann::json& c,
                                 const std::function<bool(int64_t)>& default_rule) {
  const int64_t n_layer = config_hparam(c, "num_hidden_layers");
  std::vector<bool> out;
  auto it = c.find("layer_types");
  if (it == c.end() || it->is_null()) {
    for (int64_t il = 0; il < n_layer; ++il) out.push_back(default_rule(il));
    return out;
  }
  if (!it->is_array() || int64_t(it->size()) != n_layer)
    throw_error("config.json: layer_types should list {} layer types (num_hidden_layers), got {}",
                n_layer, it->dump().substr(0, 200));
  for (const nlohmann::json& t : *it) {
    if (t == "sliding_attention") out.push_back(true);
    else if (t == "full_attention") out.push_back(false);
    else
      throw_error("config.json: layer_types holds {}; sliding_attention and full_attention are "
                  "known",
                  t.dump());
  }
  return out;
}

void set_sliding_pattern(Metadata& m, const std::string& arch, const std::vector<bool>& sliding) {
  std::vector<Value> items;
  for (bool s : sliding) items.push_back(Value::boolean(s));
  m.set(arch + ".attention.sliding_window_pattern",
        Value::array(ValueType::Bool, std::move(items)));
}

void llama_like_metadata(const nlohmann::json& c, Metadata& m, const std::string& arch) {
  // Every integer is range-checked before it is stored as u32 (config_hparam: [1, 2^30]).
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  const int64_t n_head = config_hparam(c, "num_attention_heads");
  const std::string a = arch + ".";
  m.set(a + "block_count", u32(config_hparam(c, "num_hidden_layers")));
  m.set(a + "context_length", u32(config_hparam(c, "max_position_embeddings")));
  m.set(a + "embedding_length", u32(config_hparam(c, "hidden_size")));
  m.set(a + "feed_forward_length", u32(config_hparam(c, "intermediate_size")));
  m.set(a + "attention.head_count", u32(n_head));
  m.set(a + "attention.head_count_kv",
        u32(config_hparam_opt(c, "num_key_value_heads").value_or(n_head)));
  m.set(a + "rope.freq_base", Value::f32(float(rope_theta(c))));
  m.set(a + "attention.layer_norm_rms_epsilon",
        Value::f32(float(config_number_opt(c, "rms_norm_eps").value_or(1e-6))));
  if (config_hparam_opt(c, "head_dim")) {
    m.set(a + "attention.key_length", u32(config_head_dim(c)));
    m.set(a + "attention.value_length", u32(config_head_dim(c)));
  }
  m.set(a + "rope.dimension_count", u32(config_head_dim(c)));
  if (auto v = config_hparam_opt(c, "vocab_size")) m.set(a + "vocab_size", u32(*v));
  // Experts: Mixtral and transformers 5 name the count num_local_experts, Qwen-MoE and OLMoE
  // num_experts. The expert and shared-expert widths where they differ from intermediate_size,
  // and norm_topk_prob as expert_weights_norm where the config says (else the family's own).
  std::optional<int64_t> n_expert = config_hparam_opt(c, "num_local_experts");
  if (!n_expert) n_expert = config_hparam_opt(c, "num_experts");
  if (n_expert) {
    m.set(a + "expert_count", u32(*n_expert));
    m.set(a + "expert_used_count", u32(config_int_in(c, "num_experts_per_tok", 1, *n_expert)));
    if (auto v = config_hparam_opt(c, "moe_intermediate_size"))
      m.set(a + "expert_feed_forward_length", u32(*v));
    if (auto v = config_hparam_opt(c, "shared_expert_intermediate_size"))
      m.set(a + "expert_shared_feed_forward_length", u32(*v));
    if (c.contains("norm_topk_prob") && !c["norm_topk_prob"].is_null())
      m.set(a + "expert_weights_norm", Value::boolean(config_bool_or(c, "norm_topk_prob", false)));
  }

  const std::string type = rope_type(c);
  const nlohmann::json* rp = rope_parameters(c);
  if (type == "linear" || type == "yarn") {
    m.set(a + "rope.scaling.type", Value::string(type));
    m.set(a + "rope.scaling.factor", Value::f32(float(config_number_opt(*rp, "factor").value_or(1.0))));
    if (type == "yarn") {
      if (auto v = config_hparam_opt(*rp, "original_max_position_embeddings"))
        m.set(a + "rope.scaling.original_context_length", u32(*v));
      // llama.cpp's converter writes the betas where the config has them; `truncate` (false in
      // gpt-oss's configs: the correction range stays fractional) is our key, which llama.cpp
      // does not read.
      if (auto v = config_number_opt(*rp, "beta_fast"))
        m.set(a + "rope.scaling.yarn_beta_fast", Value::f32(float(*v)));
      if (auto v = config_number_opt(*rp, "beta_slow"))
        m.set(a + "rope.scaling.yarn_beta_slow", Value::f32(float(*v)));
      if (!config_bool_or(*rp, "truncate", true))
        m.set(a + "rope.scaling.yarn_truncate", Value::boolean(false));
      // The attention factor is 0.1 ln(factor) + 1 here, as in llama.cpp and transformers' default.
      const double factor = config_number_opt(*rp, "factor").value_or(1.0);
      const double mscale = factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0;
      if (auto v = config_number_opt(*rp, "attention_factor"); v && std::fabs(*v - mscale) > 1e-6)
        throw_error("config.json: rope attention_factor {} differs from YaRN's 0.1 ln({}) + 1 = "
                    "{}; another factor is not supported",
                    *v, factor, mscale);
      for (const char* key : {"mscale", "mscale_all_dim"})
        if (rp->contains(key) && !(*rp)[key].is_null())
          throw_error("config.json: rope {} is set; YaRN's mscale variants are not supported", key);
    }
  } else if (type != "default" && type != "llama3") {
    throw_error("config.json: rope type '{}' is not supported for {} (default, linear, yarn, "
                "llama3 are)",
                type, arch);
  }
}

}  // namespace jitllm
