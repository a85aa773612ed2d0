// Qwen2 / Qwen2.5 from Hugging Face (Qwen2ForCausalLM): config.json -> "qwen2.*" keys as
// llama.cpp's converter writes them, and tensor names: llama's plus the q/k/v biases (1-D, so
// stored F32). No q/k row permutation (NEOX rope, HF's own layout). Refused: use_sliding_window,
// which the qwen2 graph does not run (every released Qwen2 checkpoint has it off).
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void qwen2_like_metadata(const nlohmann::json& c, Metadata& m, const char* arch) {
  if (config_bool_or(c, "use_sliding_window", false))
    throw_error("config.json: use_sliding_window is true; {}'s sliding-window layers are not "
                "supported (every layer must attend fully)", arch);
  llama_like_metadata(c, m, arch);
}

void qwen2_metadata(const nlohmann::json& c, Metadata& m) { qwen2_like_metadata(c, m, "qwen2"); }
void qwen2moe_metadata(const nlohmann::json& c, Metadata& m) { qwen2_like_metadata(c, m, "qwen2moe"); }

const HfLayerTensor kQwen2Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

std::optional<HfTensorMapping> qwen2_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_by_table(name, c, {kLlamaProjections, kQwen2Layer}, "qwen2");
}

std::optional<HfTensorMapping> qwen2moe_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_with_experts(name, c, {kLlamaProjections, kQwen2Layer}, "qwen2moe");
}

}  // namespace

extern const HfArchitecture kHfQwen2{"qwen2", qwen2_metadata, qwen2_map_tensor, nullptr};
// Qwen1.5/2-MoE (Qwen2MoeForCausalLM): the same attention, experts and a gated shared expert.
extern const HfArchitecture kHfQwen2Moe{"qwen2moe", qwen2moe_metadata, qwen2moe_map_tensor, nullptr};

}  // namespace jitllm
