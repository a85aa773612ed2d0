// Phi-3 / Phi-3.5 / Phi-4 / Phi-4-mini from Hugging Face (Phi3ForCausalLM): config.json ->
// "phi3.*" keys as llama.cpp's conversion/phi.py writes them, and tensor names. The fused
// projections stay fused, as in llama.cpp's GGUFs: qkv_proj -> attn_qkv [n_embd, q_dim + 2 kv_dim]
// and gate_up_proj -> ffn_up [n_embd, 2 n_ff] (gate first). No q/k row permutation (NEOX rope).
// Partial rotary (Phi-4-mini: 0.75 of each head) sets rope.dimension_count; LongRoPE ("longrope",
// or its old name "su") adds the rope_factors_long / rope_factors_short tensors [n_rot / 2] and
// the attention factor for contexts past the original one.
#include <cmath>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

struct Phi3Rope {
  int64_t n_rot;          // rotated dimensions of each head
  int64_t n_ctx;          // max_position_embeddings
  int64_t n_ctx_orig;     // original_max_position_embeddings
  bool longrope;
};

Phi3Rope phi3_rope(const nlohmann::json& c) {
  const int64_t n_embd = config_hparam(c, "hidden_size");
  const int64_t n_head = config_hparam(c, "num_attention_heads");
  // llama.cpp's phi3 graph reads q as [n_embd]: the heads must tile the hidden size exactly.
  if (n_embd % n_head != 0 || config_head_dim(c) * n_head != n_embd)
    throw_error("config.json: head_dim {} x num_attention_heads {} is not hidden_size {} (phi3 "
                "needs the query width to equal the hidden size)",
                config_head_dim(c), n_head, n_embd);
  const double rot_pct = rope_number_opt(c, "partial_rotary_factor").value_or(1.0);
  if (!(rot_pct > 0.0 && rot_pct <= 1.0))
    throw_error("config.json: partial_rotary_factor is {}, outside (0, 1]", rot_pct);
  Phi3Rope r;
  r.n_rot = int64_t(rot_pct * double(n_embd)) / n_head;  // as phi.py: int(pct * n_embd) // n_head
  if (r.n_rot < 2 || r.n_rot % 2 != 0)
    throw_error("config.json: partial_rotary_factor {} rotates {} dimensions of each head; that "
                "must be a positive even number",
                rot_pct, r.n_rot);
  r.n_ctx = config_hparam(c, "max_position_embeddings");
  std::optional<int64_t> orig;
  if (const nlohmann::json* rp = rope_parameters(c))
    orig = config_hparam_opt(*rp, "original_max_position_embeddings");
  if (!orig) orig = config_hparam_opt(c, "original_max_position_embeddings");
  if (!orig)
    throw_error("config.json: 'original_max_position_embeddings' is missing (phi3 records it as "
                "rope.scaling.original_context_length)");
  r.n_ctx_orig = *orig;
  const std::string type = rope_type(c);
  r.longrope = type == "longrope" || type == "su";
  if (!r.longrope && type != "default")
    throw_error("config.json: rope type '{}' is not supported for phi3 (default, longrope and su "
                "are)",
                type);
  return r;
}

// rope_parameters' long_factor / short_factor: n_rot / 2 numbers each.
std::vector<float> longrope_factors(const nlohmann::json& c, const char* key, int64_t n_rot) {
  const nlohmann::json* rp = rope_parameters(c);
  const auto it = rp->find(key);
  if (it == rp->end() || !it->is_array())
    throw_error("config.json: LongRoPE needs '{}' (a list of {} numbers) in {}", key, n_rot / 2,
                c.contains("rope_parameters") ? "rope_parameters" : "rope_scaling");
  if (int64_t(it->size()) != n_rot / 2)
    throw_error("config.json: '{}' has {} numbers; with {} rotated dimensions it needs {}", key,
                it->size(), n_rot, n_rot / 2);
  std::vector<float> out;
  for (const nlohmann::json& v : *it) {
    if (!v.is_number()) throw_error("config.json: '{}' holds {}, not a number", key, v.dump());
    out.push_back(float(v.get<double>()));
  }
  return out;
}

void phi3_metadata(const nlohmann::json& c, Metadata& m) {
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  const Phi3Rope r = phi3_rope(c);
  const int64_t n_head = config_hparam(c, "num_attention_heads");
  m.set("phi3.context_length", u32(r.n_ctx));
  m.set("phi3.rope.scaling.original_context_length", u32(r.n_ctx_orig));
  m.set("phi3.embedding_length", u32(config_hparam(c, "hidden_size")));
  m.set("phi3.feed_forward_length", u32(config_hparam(c, "intermediate_size")));
  m.set("phi3.block_count", u32(config_hparam(c, "num_hidden_layers")));
  m.set("phi3.attention.head_count", u32(n_head));
  m.set("phi3.attention.head_count_kv",
        u32(config_hparam_opt(c, "num_key_value_heads").value_or(n_head)));
  m.set("phi3.attention.layer_norm_rms_epsilon",
        Value::f32(float(config_number(c, "rms_norm_eps"))));
  m.set("phi3.rope.dimension_count", u32(r.n_rot));
  m.set("phi3.rope.freq_base", Value::f32(float(rope_theta(c))));
  // llama.cpp writes 0 for "none" (Phi-4); its phi3 loader then runs every layer in full.
  m.set("phi3.attention.sliding_window",
        u32(config_int_in_opt(c, "sliding_window", 0, kMaxHparam).value_or(0)));
  if (auto v = config_hparam_opt(c, "vocab_size")) m.set("phi3.vocab_size", u32(*v));
  if (r.longrope) {
    longrope_factors(c, "long_factor", r.n_rot);  // checked here, so the error names the field
    longrope_factors(c, "short_factor", r.n_rot);
    // phi.py: sqrt(1 + ln(scale) / ln(original context)) for scale = context / original > 1.
    const double scale = double(r.n_ctx) / double(r.n_ctx_orig);
    const double attn_factor =
        scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(double(r.n_ctx_orig))) : 1.0;
    m.set("phi3.rope.scaling.attn_factor", Value::f32(float(attn_factor)));
  }
}

std::vector<HfGeneratedTensor> phi3_generated(const nlohmann::json& c) {
  const Phi3Rope r = phi3_rope(c);
  if (!r.longrope) return {};
  return {{"rope_factors_long.weight", longrope_factors(c, "long_factor", r.n_rot)},
          {"rope_factors_short.weight", longrope_factors(c, "short_factor", r.n_rot)}};
}

const HfLayerTensor kPhi3Layer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    // Checkpoints that store the projections apart.
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

std::optional<HfTensorMapping> phi3_map_tensor(const std::string& name, const nlohmann::json& c) {
  return map_tensor_by_table(name, c, {kPhi3Layer}, "phi3");
}

}  // namespace

extern const HfArchitecture kHfPhi3{"phi3", phi3_metadata, phi3_map_tensor, phi3_generated};

}  // namespace jitllm
