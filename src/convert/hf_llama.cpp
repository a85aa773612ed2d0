// The llama family from Hugging Face (LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM):
// config.json -> "llama.*" keys as llama.cpp's convert_hf_to_gguf.py writes them (plus Mistral's
// sliding window, our addition), tensor names, q/k row permutation, Mixtral expert stacking, and
// llama3 rope_freqs.
#include <cmath>
#include <numbers>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void llama_metadata(const nlohmann::json& c, Metadata& m) {
  llama_like_metadata(c, m, "llama");
  // Mistral's sliding-window attention (Mistral-7B-v0.1: 4096; null in later ones). llama.cpp's
  // loader ignores this key for llama; ours honours it.
  if (auto window = config_hparam_opt(c, "sliding_window"))
    m.set("llama.attention.sliding_window", Value::u32(uint32_t(*window)));
}

std::optional<HfTensorMapping> llama_map_tensor(const std::string& name, const nlohmann::json& c) {
  if (auto shared = map_model_wide_tensor(name, c)) return *shared;
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    const std::string blk = "blk." + index + ".";
    const int64_t n_head = config_hparam(c, "num_attention_heads");
    const int64_t n_head_kv = config_hparam_opt(c, "num_key_value_heads").value_or(n_head);
    struct Entry {
      const char* hf;
      const char* gguf;
      int permute;  // 0 none, 1 with n_head, 2 with n_head_kv
    };
    static const Entry table[] = {
        {"input_layernorm.weight", "attn_norm.weight", 0},
        {"self_attn.q_proj.weight", "attn_q.weight", 1},
        {"self_attn.k_proj.weight", "attn_k.weight", 2},
        {"self_attn.v_proj.weight", "attn_v.weight", 0},
        {"self_attn.o_proj.weight", "attn_output.weight", 0},
        {"self_attn.q_proj.bias", "attn_q.bias", 1},
        {"self_attn.k_proj.bias", "attn_k.bias", 2},
        {"self_attn.v_proj.bias", "attn_v.bias", 0},
        {"self_attn.o_proj.bias", "attn_output.bias", 0},
        {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
        {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
        {"mlp.up_proj.weight", "ffn_up.weight", 0},
        {"mlp.down_proj.weight", "ffn_down.weight", 0},
    };
    for (const Entry& e : table)
      if (rest == e.hf)
        return HfTensorMapping{blk + e.gguf,
                               e.permute == 1 ? n_head : e.permute == 2 ? n_head_kv : 0};
    if (rest == "self_attn.rotary_emb.inv_freq") return std::nullopt;  // recomputed from theta
    if (rest == "block_sparse_moe.gate.weight") {  // Mixtral's router, kept in float32
      HfTensorMapping router{blk + "ffn_gate_inp.weight"};
      router.f32 = true;
      return router;
    }
    // Mixtral experts: block_sparse_moe.experts.E.w{1,2,3}.weight -> stacked gate/down/up.
    const std::string experts = "block_sparse_moe.experts.";
    if (rest.starts_with(experts)) {
      const size_t edot = rest.find('.', experts.size());
      const std::string e = rest.substr(experts.size(), edot - experts.size());
      const std::string w = edot == std::string::npos ? "" : rest.substr(edot + 1);
      if (!e.empty() && e.find_first_not_of("0123456789") == std::string::npos) {
        const int32_t expert = std::stoi(e);
        if (w == "w1.weight") return HfTensorMapping{blk + "ffn_gate_exps.weight", 0, expert};
        if (w == "w2.weight") return HfTensorMapping{blk + "ffn_down_exps.weight", 0, expert};
        if (w == "w3.weight") return HfTensorMapping{blk + "ffn_up_exps.weight", 0, expert};
      }
    }
  }
  throw_error("tensor '{}' is not part of the llama architecture as jitllm knows it", name);
}

// llama3 rope scaling: per-frequency factors stored as rope_freqs.weight [head_dim / 2], computed
// like llama.cpp's converter (float32 throughout, as its torch code does).
std::vector<HfGeneratedTensor> llama_generated(const nlohmann::json& c) {
  if (rope_type(c) != "llama3") return {};
  const nlohmann::json& rp = *rope_parameters(c);
  const float base = float(rope_theta(c));
  const int64_t dim = config_head_dim(c);
  const float factor = float(config_number_opt(rp, "factor").value_or(8.0));
  const float low_freq_factor = float(config_number_opt(rp, "low_freq_factor").value_or(1.0));
  const float high_freq_factor = float(config_number_opt(rp, "high_freq_factor").value_or(4.0));
  const float old_context =
      float(config_number_opt(rp, "original_max_position_embeddings").value_or(8192));
  const float low_freq_wavelen = old_context / low_freq_factor;
  const float high_freq_wavelen = old_context / high_freq_factor;
  HfGeneratedTensor t{"rope_freqs.weight", {}};
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / ::powf(base, float(i) / float(dim));
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_freq_wavelen) {
      t.values.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      t.values.push_back(factor);
    } else {
      const float smooth =
          (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      t.values.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return {t};
}

}  // namespace

extern const HfArchitecture kHfLlama{"llama", llama_metadata, llama_map_tensor, llama_generated};

}  // namespace jitllm
