// Qwen3 from Hugging Face (Qwen3ForCausalLM): config.json -> "qwen3.*" keys as llama.cpp's
// converter writes them, and tensor names. No q/k row permutation: the qwen3 family rotates
// NEOX-style pairs (i, i + n_rot/2), HF's own layout. Refused: attention biases and sliding-window
// layers, which the qwen3 graph does not run.
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void qwen3_like_metadata(const nlohmann::json& c, Metadata& m, const char* arch) {
  if (config_bool_or(c, "attention_bias", false))
    throw_error("config.json: attention_bias is not supported for {}", arch);
  if (config_bool_or(c, "use_sliding_window", false))
    throw_error("config.json: use_sliding_window is not supported for {}", arch);
  llama_like_metadata(c, m, arch);
}

void qwen3_metadata(const nlohmann::json& c, Metadata& m) { qwen3_like_metadata(c, m, "qwen3"); }
void qwen3moe_metadata(const nlohmann::json& c, Metadata& m) { qwen3_like_metadata(c, m, "qwen3moe"); }

const HfLayerTensor kQwen3Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

std::optional<HfTensorMapping> qwen3_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_by_table(name, c, {kLlamaProjections, kQwen3Layer}, "qwen3");
}

std::optional<HfTensorMapping> qwen3moe_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_with_experts(name, c, {kLlamaProjections, kQwen3Layer}, "qwen3moe");
}

}  // namespace

extern const HfArchitecture kHfQwen3{"qwen3", qwen3_metadata, qwen3_map_tensor, nullptr};
// Qwen3-MoE (Qwen3MoeForCausalLM): the same attention, experts in every layer.
extern const HfArchitecture kHfQwen3Moe{"qwen3moe", qwen3moe_metadata, qwen3moe_map_tensor, nullptr};

}  // namespace jitllm
