// OLMo 2 from Hugging Face (Olmo2ForCausalLM): config.json -> "olmo2.*" keys as llama.cpp's
// converter writes them, and tensor names. OLMo 2 normalizes after each sublayer, not before, so
// there is no attn_norm / ffn_norm; its q/k norms span the whole projection ([q_dim], [kv_dim]),
// not one head. No q/k row permutation (NEOX rope). Refused: a sliding window (that is OLMo 3).
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void olmo2_metadata(const nlohmann::json& c, Metadata& m) {
  if (config_int_opt(c, "sliding_window"))
    throw_error("config.json: sliding_window is set; olmo2 has no sliding-window layers (OLMo 3, "
                "which has them, is not supported)");
  if (config_bool_or(c, "attention_bias", false))
    throw_error("config.json: attention_bias is not supported for olmo2");
  llama_like_metadata(c, m, "olmo2");
}

const HfLayerTensor kOlmo2Layer[] = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

std::optional<HfTensorMapping> olmo2_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_by_table(name, c, {kLlamaProjections, kOlmo2Layer}, "olmo2");
}

}  // namespace

extern const HfArchitecture kHfOlmo2{"olmo2", olmo2_metadata, olmo2_map_tensor, nullptr};

}  // namespace jitllm
