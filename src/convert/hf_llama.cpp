// The llama family from Hugging Face (LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM):
// config.json -> "llama.*" keys as llama.cpp's convert_hf_to_gguf.py writes them, tensor names,
// q/k row permutation, Mixtral expert stacking, and llama3 rope_freqs.
#include <cmath>
#include <numbers>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

// HF's rope settings moved from top-level keys ("rope_theta", "rope_scaling") into
// "rope_parameters" in transformers 5; read either.
const nlohmann::json* rope_parameters(const nlohmann::json& config) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = config.find(key);
    if (it != config.end() && it->is_object()) return &*it;
  }
  return nullptr;
}

double rope_theta(const nlohmann::json& config) {
  if (auto v = config_number_opt(config, "rope_theta")) return *v;
  if (const nlohmann::json* rp = rope_parameters(config))
    if (auto v = config_number_opt(*rp, "rope_theta")) return *v;
  return 10000.0;
}

std::string rope_type(const nlohmann::json& config) {
  const nlohmann::json* rp = rope_parameters(config);
  if (!rp) return "default";
  for (const char* key : {"rope_type", "type"}) {
    auto it = rp->find(key);
    if (it != rp->end() && it->is_string()) return it->get<std::string>();
  }
  return "default";
}

// A count or size of the model: at least 1 and no more than the engine's Config takes.
int64_t hparam(const nlohmann::json& config, const char* key) {
  return config_int_in(config, key, 1, kMaxHparam);
}
std::optional<int64_t> hparam_opt(const nlohmann::json& config, const char* key) {
  return config_int_in_opt(config, key, 1, kMaxHparam);
}

int64_t head_dim(const nlohmann::json& config) {
  if (auto hd = hparam_opt(config, "head_dim")) return *hd;
  return hparam(config, "hidden_size") / hparam(config, "num_attention_heads");
}

}  // namespace

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
  const std::string prefix = "model.layers.";
  if (!name.starts_with(prefix)) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return false;
  index = name.substr(prefix.size(), dot - prefix.size());
  rest = name.substr(dot + 1);
  return !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
}

void llama_like_metadata(const nlohmann::json& c, Metadata& m, const std::string& arch) {
  // Every integer is range-checked before it is stored as u32 (hparam: [1, 2^30]).
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  const int64_t n_head = hparam(c, "num_attention_heads");
  const std::string a = arch + ".";
  m.set(a + "block_count", u32(hparam(c, "num_hidden_layers")));
  m.set(a + "context_length", u32(hparam(c, "max_position_embeddings")));
  m.set(a + "embedding_length", u32(hparam(c, "hidden_size")));
  m.set(a + "feed_forward_length", u32(hparam(c, "intermediate_size")));
  m.set(a + "attention.head_count", u32(n_head));
  m.set(a + "attention.head_count_kv", u32(hparam_opt(c, "num_key_value_heads").value_or(n_head)));
  m.set(a + "rope.freq_base", Value::f32(float(rope_theta(c))));
  m.set(a + "attention.layer_norm_rms_epsilon",
        Value::f32(float(config_number_opt(c, "rms_norm_eps").value_or(1e-6))));
  if (hparam_opt(c, "head_dim")) {
    m.set(a + "attention.key_length", u32(head_dim(c)));
    m.set(a + "attention.value_length", u32(head_dim(c)));
  }
  m.set(a + "rope.dimension_count", u32(head_dim(c)));
  if (auto v = hparam_opt(c, "vocab_size")) m.set(a + "vocab_size", u32(*v));
  if (auto n = hparam_opt(c, "num_local_experts")) {
    m.set(a + "expert_count", u32(*n));
    m.set(a + "expert_used_count", u32(config_int_in(c, "num_experts_per_tok", 1, *n)));
  }

  const std::string type = rope_type(c);
  const nlohmann::json* rp = rope_parameters(c);
  if (type == "linear" || type == "yarn") {
    m.set(a + "rope.scaling.type", Value::string(type));
    m.set(a + "rope.scaling.factor", Value::f32(float(config_number_opt(*rp, "factor").value_or(1.0))));
    if (type == "yarn")
      if (auto v = hparam_opt(*rp, "original_max_position_embeddings"))
        m.set(a + "rope.scaling.original_context_length", u32(*v));
  } else if (type != "default" && type != "llama3") {
    throw_error("config.json: rope type '{}' is not supported for {} (default, linear, yarn, "
                "llama3 are)",
                type, arch);
  }
}

namespace {

void llama_metadata(const nlohmann::json& c, Metadata& m) { llama_like_metadata(c, m, "llama"); }

std::optional<HfTensorMapping> llama_map_tensor(const std::string& name, const nlohmann::json& c) {
  if (auto shared = map_model_wide_tensor(name, c)) return *shared;
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    const std::string blk = "blk." + index + ".";
    const int64_t n_head = hparam(c, "num_attention_heads");
    const int64_t n_head_kv = hparam_opt(c, "num_key_value_heads").value_or(n_head);
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
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", 0},
    };
    for (const Entry& e : table)
      if (rest == e.hf)
        return HfTensorMapping{blk + e.gguf,
                               e.permute == 1 ? n_head : e.permute == 2 ? n_head_kv : 0};
    if (rest == "self_attn.rotary_emb.inv_freq") return std::nullopt;  // recomputed from theta
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
  const int64_t dim = head_dim(c);
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
