// OLMoE from Hugging Face (OlmoeForCausalLM): config.json -> "olmoe.*" keys as llama.cpp's
// converter writes them, and tensor names. Unlike OLMo 2 it normalizes before each sublayer
// (attn_norm, ffn_norm); its q/k norms span the whole projection ([q_dim], [kv_dim]); every
// layer's FFN is experts of intermediate_size, chosen by mlp.gate. No q/k row permutation (NEOX
// rope). Refused: clip_qkv, which the olmoe graph does not apply.
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void olmoe_metadata(const nlohmann::json& c, Metadata& m) {
  if (c.contains("clip_qkv") && !c["clip_qkv"].is_null())
    throw_error("config.json: clip_qkv is set; clipping q/k/v is not supported for olmoe");
  if (config_bool_or(c, "attention_bias", false))
    throw_error("config.json: attention_bias is not supported for olmoe");
  llama_like_metadata(c, m, "olmoe");
}

const HfLayerTensor kOlmoeLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

std::optional<HfTensorMapping> olmoe_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_with_experts(name, c, {kLlamaProjections, kOlmoeLayer}, "olmoe");
}

}  // namespace

extern const HfArchitecture kHfOlmoe{"olmoe", olmoe_metadata, olmoe_map_tensor, nullptr};

}  // namespace jitllm
