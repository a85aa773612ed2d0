// The Gemma family from Hugging Face: GemmaForCausalLM -> "gemma", Gemma2ForCausalLM -> "gemma2",
// Gemma3ForCausalLM (text only, model_type gemma3_text) -> "gemma3"; keys and tensor names as
// llama.cpp's conversion/gemma.py writes them, plus what it leaves to its loader's defaults but
// the model needs (attention.scale from query_pre_attn_scalar, the per-layer sliding pattern from
// layer_types, the sliding layers' rope base). Every "*norm.weight" is stored as 1 + w in F32
// (Gemma's RMSNorm multiplies by 1 + w). The output head is the embedding (tied).
#include <algorithm>
#include <cmath>
#include <functional>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

// Gemma runs the tanh approximation of GELU (llama.cpp's graphs always do). Gemma 1's own configs
// say hidden_act "gelu" (google/gemma-2b, -7b) and mean the approximation, which HF's Gemma code
// ran for them; so for gemma every field present must name a GELU. Gemma 2 and 3 read
// hidden_activation (else hidden_act) as written, where "gelu" would be exact: tanh only.
void check_activation(const nlohmann::json& c, const char* arch) {
  const bool gemma1 = std::string(arch) == "gemma";
  const char* accepted =
      gemma1 ? "gelu_pytorch_tanh, gelu_tanh and gelu" : "gelu_pytorch_tanh and gelu_tanh";
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    const std::optional<std::string> act = config_string_opt(c, key);
    if (!act) continue;
    if (*act != "gelu_pytorch_tanh" && *act != "gelu_tanh" && !(gemma1 && *act == "gelu"))
      throw_error("config.json: {} '{}' is not supported for {} ({} are)", key, *act, arch,
                  accepted);
    if (!gemma1) return;  // hidden_activation, when set, is the one HF runs
  }
}

bool tied(const nlohmann::json& c) { return config_bool_or(c, "tie_word_embeddings", true); }

// What every Gemma writes: llama's shape keys with key_length = value_length = head_dim (Gemma's
// head_dim is not hidden_size / heads: Gemma-7B 256 x 16 heads over 3072).
void gemma_common_metadata(const nlohmann::json& c, Metadata& m, const char* arch) {
  check_activation(c, arch);
  config_hparam(c, "head_dim");  // required, as llama.cpp reads it
  llama_like_metadata(c, m, arch);
}

void check_default_rope(const nlohmann::json& c, const char* arch) {
  if (const std::string type = rope_type(c); type != "default")
    throw_error("config.json: rope type '{}' is not supported for {} (default is)", type, arch);
}

void check_tied(const nlohmann::json& c, const char* arch) {
  if (!tied(c))
    throw_error("config.json: tie_word_embeddings is false, but {} always uses the embedding as "
                "its output head",
                arch);
}

// HF scales the scores by query_pre_attn_scalar^-0.5 (not head_dim^-0.5: Gemma-2-27B and
// Gemma-3-27B differ); llama.cpp infers it from the model size, so it is written here.
void set_attention_scale(const nlohmann::json& c, Metadata& m, const std::string& arch) {
  if (auto q = config_number_opt(c, "query_pre_attn_scalar")) {
    if (!(*q > 0.0)) throw_error("config.json: query_pre_attn_scalar is {}, not positive", *q);
    m.set(arch + ".attention.scale", Value::f32(float(std::pow(*q, -0.5))));
  }
}

void gemma_metadata(const nlohmann::json& c, Metadata& m) {
  check_default_rope(c, "gemma");
  check_tied(c, "gemma");
  gemma_common_metadata(c, m, "gemma");
}

void gemma2_metadata(const nlohmann::json& c, Metadata& m) {
  check_default_rope(c, "gemma2");
  check_tied(c, "gemma2");
  gemma_common_metadata(c, m, "gemma2");
  m.set("gemma2.attn_logit_softcapping",
        Value::f32(float(config_number(c, "attn_logit_softcapping"))));
  m.set("gemma2.final_logit_softcapping",
        Value::f32(float(config_number(c, "final_logit_softcapping"))));
  m.set("gemma2.attention.sliding_window",
        Value::u32(uint32_t(config_hparam(c, "sliding_window"))));
  // HF's Gemma2 before layer_types: even layers slide.
  set_sliding_pattern(m, "gemma2", sliding_layers(c, [](int64_t il) { return il % 2 == 0; }));
  set_attention_scale(c, m, "gemma2");
}

void gemma3_metadata(const nlohmann::json& c, Metadata& m) {
  if (auto cap = config_number_opt(c, "attn_logit_softcapping"))
    throw_error("config.json: attn_logit_softcapping is {}; gemma3 has no attention soft-capping "
                "(it must be null)",
                *cap);
  if (const std::string type = rope_type(c); type != "default" && type != "linear")
    throw_error("config.json: rope type '{}' of the full-attention layers is not supported for "
                "gemma3 (default and linear are)",
                type);
  if (const std::string type = sliding_rope_type(c); type != "default")
    throw_error("config.json: rope type '{}' of the sliding-window layers is not supported for "
                "gemma3 (default is)",
                type);
  gemma_common_metadata(c, m, "gemma3");
  if (auto cap = config_number_opt(c, "final_logit_softcapping"))
    m.set("gemma3.final_logit_softcapping", Value::f32(float(*cap)));
  // HF's Gemma3 before layer_types: every sliding_window_pattern-th layer attends in full.
  const int64_t period = config_hparam_opt(c, "sliding_window_pattern")
                             .value_or(config_hparam_opt(c, "_sliding_window_pattern").value_or(6));
  const std::vector<bool> sliding =
      sliding_layers(c, [period](int64_t il) { return (il + 1) % period != 0; });
  set_sliding_pattern(m, "gemma3", sliding);
  if (std::find(sliding.begin(), sliding.end(), true) != sliding.end())
    m.set("gemma3.attention.sliding_window",
          Value::u32(uint32_t(config_hparam(c, "sliding_window"))));
  // The sliding layers' own base (transformers 5: rope_parameters.sliding_attention; 4:
  // rope_local_base_freq; HF's default 10000).
  std::optional<double> local_base;
  if (const nlohmann::json* rp = sliding_rope_parameters(c))
    local_base = config_number_opt(*rp, "rope_theta");
  if (!local_base) local_base = config_number_opt(c, "rope_local_base_freq");
  m.set("gemma3.rope.freq_base_swa", Value::f32(float(local_base.value_or(10000.0))));
  set_attention_scale(c, m, "gemma3");
}

// llama.cpp's SentencePiece import for Gemma: no space prefix; Gemma 1 also names its
// end-of-turn token (107, <end_of_turn>) when the files did not.
void gemma_sentencepiece_keys(const nlohmann::json&, Metadata& m) {
  if (m.get_string_or("tokenizer.ggml.model", "") == "llama")
    m.set("tokenizer.ggml.add_space_prefix", Value::boolean(false));
}

void gemma1_tokenizer_keys(const nlohmann::json& c, Metadata& m) {
  gemma_sentencepiece_keys(c, m);
  const Value* tokens = m.find("tokenizer.ggml.tokens");
  if (!m.has("tokenizer.ggml.eot_token_id") && tokens && tokens->as_array().items.size() > 107)
    m.set("tokenizer.ggml.eot_token_id", Value::u32(107));
}

const HfLayerTensor kGemmaLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

// Gemma 2 and 3 normalize before and after each sublayer; Gemma 3 also q and k per head.
const HfLayerTensor kGemma3Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // gemma3 only: last, cut for gemma2
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};
const std::span<const HfLayerTensor> kGemma2Layer(kGemma3Layer, std::size(kGemma3Layer) - 2);

std::optional<HfTensorMapping> map_gemma_tensor(const std::string& name, const nlohmann::json& c,
                                                std::span<const HfLayerTensor> table,
                                                const char* arch) {
  if (name == "lm_head.weight" && tied(c)) return std::nullopt;  // a copy of the embedding
  std::optional<HfTensorMapping> m =
      name == "lm_head.weight" ? HfTensorMapping{"output.weight"}
                               : map_tensor_by_table(name, c, {kLlamaProjections, table}, arch);
  if (m && name.ends_with("norm.weight")) m->plus_one = true;
  return m;
}

std::optional<HfTensorMapping> gemma_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_gemma_tensor(name, c, kGemmaLayer, "gemma");
}
std::optional<HfTensorMapping> gemma2_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_gemma_tensor(name, c, kGemma2Layer, "gemma2");
}
std::optional<HfTensorMapping> gemma3_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_gemma_tensor(name, c, kGemma3Layer, "gemma3");
}

}  // namespace

extern const HfArchitecture kHfGemma{"gemma", gemma_metadata, gemma_map_tensor, nullptr,
                                     gemma1_tokenizer_keys};
extern const HfArchitecture kHfGemma2{"gemma2", gemma2_metadata, gemma2_map_tensor, nullptr,
                                      gemma_sentencepiece_keys};
extern const HfArchitecture kHfGemma3{"gemma3", gemma3_metadata, gemma3_map_tensor, nullptr,
                                      gemma_sentencepiece_keys};

}  // namespace jitllm
