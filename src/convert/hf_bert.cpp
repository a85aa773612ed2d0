// BERT from Hugging Face (BertModel, BertForMaskedLM's encoder, BertForSequenceClassification):
// config.json -> "bert.*" keys as llama.cpp's converter writes them, and tensor names. The
// encoder's names may carry the "bert." prefix of the task models; the masked-LM head
// (cls.predictions.*) and, for a plain encoder, the pooler are not part of the model (embeddings
// pool the hidden states). A sequence classifier (a cross-encoder) keeps the pooler as cls and
// the classifier as cls.output, and pools by rank. Refused: relative position embeddings and
// activations other than GELU (erf).
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

bool is_classifier(const nlohmann::json& c) {
  const auto it = c.find("architectures");
  return it != c.end() && it->is_array() && !it->empty() && (*it)[0].is_string() &&
         (*it)[0].get<std::string>() == "BertForSequenceClassification";
}

void bert_metadata(const nlohmann::json& c, Metadata& m) {
  const std::string a = "bert.";
  if (const auto pos = config_string_opt(c, "position_embedding_type"); pos && *pos != "absolute")
    throw_error("config.json: position_embedding_type '{}' is not supported (absolute only)", *pos);
  if (const auto act = config_string_opt(c, "hidden_act"); act && *act != "gelu")
    throw_error("config.json: hidden_act '{}' is not supported (gelu only)", *act);
  m.set(a + "block_count", Value::u32(uint32_t(config_hparam(c, "num_hidden_layers"))));
  m.set(a + "context_length", Value::u32(uint32_t(config_hparam(c, "max_position_embeddings"))));
  m.set(a + "embedding_length", Value::u32(uint32_t(config_hparam(c, "hidden_size"))));
  m.set(a + "feed_forward_length", Value::u32(uint32_t(config_hparam(c, "intermediate_size"))));
  m.set(a + "attention.head_count", Value::u32(uint32_t(config_hparam(c, "num_attention_heads"))));
  const auto eps = config_number_opt(c, "layer_norm_eps");
  m.set(a + "attention.layer_norm_epsilon", Value::f32(float(eps.value_or(1e-12))));
  m.set(a + "attention.causal", Value::boolean(false));
  // A sentence-transformers folder's 1_Pooling/config.json overrides this (hf_source.cpp).
  m.set(a + "pooling_type", Value::u32(is_classifier(c) ? 4 : 1));
}

// The encoder's layer names after "encoder.layer.N.".
const HfLayerTensor kBertLayer[] = {
    {"attention.self.query.weight", "attn_q.weight"},
    {"attention.self.query.bias", "attn_q.bias"},
    {"attention.self.key.weight", "attn_k.weight"},
    {"attention.self.key.bias", "attn_k.bias"},
    {"attention.self.value.weight", "attn_v.weight"},
    {"attention.self.value.bias", "attn_v.bias"},
    {"attention.output.dense.weight", "attn_output.weight"},
    {"attention.output.dense.bias", "attn_output.bias"},
    {"attention.output.LayerNorm.weight", "attn_output_norm.weight"},
    {"attention.output.LayerNorm.bias", "attn_output_norm.bias"},
    {"intermediate.dense.weight", "ffn_up.weight"},
    {"intermediate.dense.bias", "ffn_up.bias"},
    {"output.dense.weight", "ffn_down.weight"},
    {"output.dense.bias", "ffn_down.bias"},
    {"output.LayerNorm.weight", "layer_output_norm.weight"},
    {"output.LayerNorm.bias", "layer_output_norm.bias"},
};

const std::pair<const char*, const char*> kBertModelWide[] = {
    {"embeddings.word_embeddings.weight", "token_embd.weight"},
    {"embeddings.position_embeddings.weight", "position_embd.weight"},
    {"embeddings.token_type_embeddings.weight", "token_types.weight"},
    {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
    {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
};

std::optional<HfTensorMapping> bert_map_tensor(const std::string& hf_name, const nlohmann::json& c) {
  const bool classifier = is_classifier(c);
  if (hf_name.starts_with("cls.")) return std::nullopt;  // the masked-LM head
  if (hf_name == "classifier.weight" && classifier) return HfTensorMapping{"cls.output.weight"};
  if (hf_name == "classifier.bias" && classifier) return HfTensorMapping{"cls.output.bias"};
  const std::string name = hf_name.starts_with("bert.") ? hf_name.substr(5) : hf_name;
  if (name == "embeddings.position_ids" || name == "embeddings.token_type_ids") return std::nullopt;
  if (name.starts_with("pooler.")) {
    if (!classifier) return std::nullopt;
    if (name == "pooler.dense.weight") return HfTensorMapping{"cls.weight"};
    if (name == "pooler.dense.bias") return HfTensorMapping{"cls.bias"};
  }
  for (const auto& [hf, gguf] : kBertModelWide)
    if (name == hf) return HfTensorMapping{gguf};
  std::string index, rest;
  if (split_layer_tensor(name, index, rest))
    for (const HfLayerTensor& e : kBertLayer)
      if (rest == e.hf) return HfTensorMapping{"blk." + index + "." + e.gguf};
  throw_error("tensor '{}' is not part of the bert architecture as jitllm knows it", hf_name);
}

}  // namespace

extern const HfArchitecture kHfBert{"bert", bert_metadata, bert_map_tensor, nullptr};

}  // namespace jitllm
