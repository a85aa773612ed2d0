// Qwen3 from Hugging Face (Qwen3ForCausalLM): config.json -> "qwen3.*" keys as llama.cpp's
// converter writes them, and tensor names. No q/k row permutation: the qwen3 family rotates
// NEOX-style pairs (i, i + n_rot/2), HF's own layout. Refused: attention biases and sliding-window
// layers, which the qwen3 graph does not run.
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void qwen3_metadata(const nlohmann::json& c, Metadata& m) {
  if (config_bool_or(c, "attention_bias", false))
    throw_error("config.json: attention_bias is not supported for qwen3");
  if (config_bool_or(c, "use_sliding_window", false))
    throw_error("config.json: use_sliding_window is not supported for qwen3");
  llama_like_metadata(c, m, "qwen3");
}

std::optional<HfTensorMapping> qwen3_map_tensor(const std::string& name, const nlohmann::json& c) {
  if (auto shared = map_model_wide_tensor(name, c)) return *shared;
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    static const std::pair<const char*, const char*> table[] = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    for (const auto& [hf, gguf] : table)
      if (rest == hf) return HfTensorMapping{"blk." + index + "." + gguf};
    if (rest == "self_attn.rotary_emb.inv_freq") return std::nullopt;  // recomputed from theta
  }
  throw_error("tensor '{}' is not part of the qwen3 architecture as jitllm knows it", name);
}

std::vector<HfGeneratedTensor> qwen3_generated(const nlohmann::json&) { return {}; }

}  // namespace

extern const HfArchitecture kHfQwen3{"qwen3", qwen3_metadata, qwen3_map_tensor, qwen3_generated};

}  // namespace jitllm
