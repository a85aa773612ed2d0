// LFM2 from Hugging Face (Lfm2ForCausalLM): config.json -> "lfm2.*" keys as llama.cpp's converter
// writes them (head_count_kv per layer, 0 on the "conv" layers of layer_types; the FFN width
// after block_auto_adjust_ff_dim's rounding; shortconv.l_cache), and tensor names: the
// operator_norm as attn_norm, feed_forward.w1/w3/w2 as gate/up/down, the q/k layernorms, the
// convolution's in_proj / conv (squeezed to [L, n_embd]) / out_proj, and the final
// embedding_norm as token_embd_norm (llama.cpp's name). Refused: conv_bias (llama.cpp has no
// bias there either) and sliding windows.
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

std::vector<bool> conv_layers(const nlohmann::json& c) {
  const int64_t n_layer = config_hparam(c, "num_hidden_layers");
  std::vector<bool> conv(size_t(n_layer), false);
  const auto types = c.find("layer_types");
  if (types != c.end() && types->is_array()) {
    if (int64_t(types->size()) != n_layer)
      throw_error("config.json: layer_types has {} entries for {} layers", types->size(), n_layer);
    for (size_t i = 0; i < types->size(); ++i) {
      const std::string t = (*types)[i].is_string() ? (*types)[i].get<std::string>() : "";
      if (t != "conv" && t != "full_attention")
        throw_error("config.json: layer_types[{}] '{}' is not conv or full_attention", i, t);
      conv[i] = t == "conv";
    }
    return conv;
  }
  const auto full = c.find("full_attn_idxs");  // older configs list the attention layers
  if (full == c.end() || !full->is_array())
    throw_error("config.json: neither layer_types nor full_attn_idxs says which layers attend");
  std::fill(conv.begin(), conv.end(), true);
  for (const auto& i : *full) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= n_layer)
      throw_error("config.json: full_attn_idxs holds {}, not a layer index", i.dump());
    conv[size_t(i.get<int64_t>())] = false;
  }
  return conv;
}

void lfm2_metadata(const nlohmann::json& c, Metadata& m) {
  if (config_bool_or(c, "conv_bias", false))
    throw_error("config.json: conv_bias is true; LFM2's convolution here has no bias");
  if (config_hparam_opt(c, "sliding_window"))
    throw_error("config.json: sliding_window is set; LFM2's sliding attention is not supported");
  llama_like_metadata(c, m, "lfm2");
  const std::string a = "lfm2.";
  const int64_t n_kv = config_hparam_opt(c, "num_key_value_heads").value_or(config_hparam(c, "num_attention_heads"));
  std::vector<int32_t> kv;
  for (const bool conv : conv_layers(c)) kv.push_back(conv ? 0 : int32_t(n_kv));
  m.set(a + "attention.head_count_kv", Value::i32_array(kv));
  m.set(a + "attention.layer_norm_rms_epsilon",
        Value::f32(float(config_number_opt(c, "norm_eps").value_or(1e-5))));
  m.set(a + "shortconv.l_cache", Value::u32(uint32_t(config_int_in(c, "conv_L_cache", 2, 64))));
  // The FFN width as HF's Lfm2MLP computes it from intermediate_size.
  int64_t ff = config_hparam_opt(c, "block_ff_dim").value_or(config_hparam(c, "intermediate_size"));
  if (config_bool_or(c, "block_auto_adjust_ff_dim", false)) {
    ff = int64_t(2 * ff / 3);
    if (const auto mult = config_number_opt(c, "block_ffn_dim_multiplier")) ff = int64_t(*mult * double(ff));
    const int64_t multiple = config_int_in(c, "block_multiple_of", 1, kMaxHparam);
    ff = multiple * ((ff + multiple - 1) / multiple);
  }
  if (ff < 1 || ff > kMaxHparam) throw_error("config.json: the FFN width comes out as {}", ff);
  m.set(a + "feed_forward_length", Value::u32(uint32_t(ff)));
}

const HfLayerTensor kLfm2Layer[] = {
    {"operator_norm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"feed_forward.w1.weight", "ffn_gate.weight"},
    {"feed_forward.w3.weight", "ffn_up.weight"},
    {"feed_forward.w2.weight", "ffn_down.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.out_proj.weight", "attn_output.weight"},
    {"self_attn.q_layernorm.weight", "attn_q_norm.weight"},
    {"self_attn.k_layernorm.weight", "attn_k_norm.weight"},
    {"conv.in_proj.weight", "shortconv.in_proj.weight"},
    {"conv.out_proj.weight", "shortconv.out_proj.weight"},
};

std::optional<HfTensorMapping> lfm2_map_tensor(const std::string& name, const nlohmann::json& c) {
  if (name == "model.embedding_norm.weight") return HfTensorMapping{"token_embd_norm.weight"};
  std::string index, rest;
  if (split_layer_tensor(name, index, rest) && rest == "conv.conv.weight") {
    HfTensorMapping m{"blk." + index + ".shortconv.conv.weight"};
    m.squeeze = true;
    return m;
  }
  return map_tensor_by_table(name, c, {kLfm2Layer}, "lfm2");
}

}  // namespace

extern const HfArchitecture kHfLfm2{"lfm2", lfm2_metadata, lfm2_map_tensor, nullptr};

}  // namespace jitllm
