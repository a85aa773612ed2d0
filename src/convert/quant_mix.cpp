// Per-tensor formats of a conversion (see quant_mix.h). The preset rules restate the facts of
// llama.cpp's llama_tensor_get_type (b10472) for the presets jitllm writes; the IQ1/IQ2/IQ3
// presets, whose formats jitllm cannot quantize, are not here.
#include "convert/quant_mix.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

#include "core/error.h"

namespace jitllm {
namespace {

struct PresetInfo {
  QuantPreset preset;
  const char* name;
  QuantType base;
  int32_t file_type;  // LLAMA_FTYPE_MOSTLY_*
};

constexpr std::array kPresets{
    PresetInfo{QuantPreset::Q2_K, "Q2_K", QuantType::Q2_K, 10},
    PresetInfo{QuantPreset::Q2_K_S, "Q2_K_S", QuantType::Q2_K, 21},
    PresetInfo{QuantPreset::Q3_K_S, "Q3_K_S", QuantType::Q3_K, 11},
    PresetInfo{QuantPreset::Q3_K_M, "Q3_K_M", QuantType::Q3_K, 12},
    PresetInfo{QuantPreset::Q3_K_L, "Q3_K_L", QuantType::Q3_K, 13},
    PresetInfo{QuantPreset::Q4_0, "Q4_0", QuantType::Q4_0, 2},
    PresetInfo{QuantPreset::Q4_1, "Q4_1", QuantType::Q4_1, 3},
    PresetInfo{QuantPreset::Q5_0, "Q5_0", QuantType::Q5_0, 8},
    PresetInfo{QuantPreset::Q5_1, "Q5_1", QuantType::Q5_1, 9},
    PresetInfo{QuantPreset::Q4_K_S, "Q4_K_S", QuantType::Q4_K, 14},
    PresetInfo{QuantPreset::Q4_K_M, "Q4_K_M", QuantType::Q4_K, 15},
    PresetInfo{QuantPreset::Q5_K_S, "Q5_K_S", QuantType::Q5_K, 16},
    PresetInfo{QuantPreset::Q5_K_M, "Q5_K_M", QuantType::Q5_K, 17},
    PresetInfo{QuantPreset::Q6_K, "Q6_K", QuantType::Q6_K, 18},
    PresetInfo{QuantPreset::Q8_0, "Q8_0", QuantType::Q8_0, 7},
    PresetInfo{QuantPreset::IQ4_NL, "IQ4_NL", QuantType::IQ4_NL, 25},
    PresetInfo{QuantPreset::MXFP4_MOE, "MXFP4_MOE", QuantType::MXFP4, 38},
};

const PresetInfo& info(QuantPreset p) {
  for (const PresetInfo& i : kPresets)
    if (i.preset == p) return i;
  throw_error("unknown quantization preset {}", int(p));
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

bool is_float(QuantType t) { return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16; }

bool is_weight_format(QuantType t) {
  const QuantTraits& q = quant_traits(t);
  // Activation-only formats and integer types are not weight formats.
  return q.supported && t != QuantType::Q8_1 && t != QuantType::Q8_K && t != QuantType::I8 &&
         t != QuantType::I16 && t != QuantType::I32 && t != QuantType::I64 && t != QuantType::F64;
}

// Why a tensor is never quantized ("" = it may be): llama.cpp's list of tensors it leaves alone.
std::string not_quantized_because(const std::string& name, const std::vector<int64_t>& shape) {
  if (has(name, "_norm.weight")) return "norm";
  if (shape.size() < 2) return "1-D";
  if (!ends_with(name, "weight")) return "not a weight";
  if (has(name, "ffn_gate_inp.weight")) return "expert router";
  if (name.starts_with("position_embd.") || name.starts_with("token_types."))
    return "position or token-type embeddings";
  for (const char* small : {"altup", "laurel", "per_layer_model_proj", "ssm_conv1d",
                            "shortconv.conv.weight", "time_mix_", "attn_rel_b.weight"})
    if (has(name, small)) return "small tensor";
  return "";
}

enum class Category { Output, TokenEmbd, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::TokenEmbd;
  // attn_qkv and attn_kv_b are as sensitive as attn_v and take its rules.
  if (has(name, "attn_qkv.weight") || has(name, "attn_kv_b.weight") || has(name, "attn_v.weight"))
    return Category::AttnV;
  if (has(name, "attn_k.weight")) return Category::AttnK;
  if (has(name, "attn_q.weight")) return Category::AttnQ;
  if (has(name, "attn_output.weight")) return Category::AttnOutput;
  if (has(name, "ffn_up")) return Category::FfnUp;
  if (has(name, "ffn_gate")) return Category::FfnGate;
  if (has(name, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// The first and last eighth of the layers, and every third one between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int64_t first_of(const Metadata& md, const std::string& key, int64_t fallback) {
  const Value* v = md.find(key);
  if (!v) return fallback;
  if (v->type() == ValueType::Array) {
    const std::vector<int64_t> all = v->as_i64_vector();
    return all.empty() ? fallback : all[0];
  }
  return v->is_integer() ? v->as_i64() : fallback;
}

// What the walk over the tensors needs to know of the model.
struct ModelShape {
  std::string arch;
  int64_t n_layer = 0, n_head = 0, n_head_kv = 0, n_expert = 0;
  bool tied_embeddings = true;  // no output.weight
  int64_t n_attention_wv = 0;
  int64_t n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }
  // llama.cpp's LLM_TYPE_70B, the one model size its rules look at: an 80-layer llama with GQA
  // (Llama 2/3 70B), an 80-layer qwen2 (Qwen2/2.5-72B).
  bool is_70b() const {
    return n_layer == 80 && ((arch == "llama" && n_head != n_head_kv) || arch == "qwen2");
  }
};

struct Walk {
  int64_t i_attention_wv = 0, i_ffn_down = 0;
};

// llama.cpp's preset rules for one quantizable tensor; `t` is the preset's base format.
QuantType preset_type(QuantPreset p, QuantType t, Category cat, const std::string& name,
                      const std::vector<int64_t>& shape, const ModelShape& m, Walk& walk) {
  using P = QuantPreset;
  using Q = QuantType;
  if (cat == Category::Output || (m.tied_embeddings && cat == Category::TokenEmbd)) {
    if (p == P::MXFP4_MOE) return Q::Q8_0;
    if (shape[0] % quant_traits(t).block_elems != 0) return Q::Q8_0;
    return t == Q::Q8_0 ? t : Q::Q6_K;
  }
  if (p == P::MXFP4_MOE) return shape.size() > 2 && shape[2] > 1 ? Q::MXFP4 : Q::Q8_0;
  if (cat == Category::TokenEmbd) return t;
  if (cat == Category::AttnV) {
    const int64_t i = walk.i_attention_wv++;
    if (p == P::Q2_K) t = m.n_gqa() >= 4 ? Q::Q4_K : Q::Q3_K;
    else if (p == P::Q2_K_S && m.n_gqa() >= 4) t = Q::Q4_K;
    else if (p == P::Q3_K_M) t = i < 2 ? Q::Q5_K : Q::Q4_K;
    else if (p == P::Q3_K_L) t = Q::Q5_K;
    else if (p == P::IQ4_NL && m.n_gqa() >= 4) t = Q::Q5_K;
    else if ((p == P::Q4_K_M || p == P::Q5_K_M) && use_more_bits(i, m.n_attention_wv)) t = Q::Q6_K;
    else if (p == P::Q4_K_S && i < 4) t = Q::Q5_K;
    // A 70B's attn_v is 8x smaller than its attn_q: more bits cost little.
    if (m.is_70b() && (t == Q::Q3_K || t == Q::Q4_K)) t = Q::Q5_K;
    if (m.n_expert == 8) t = Q::Q8_0;
    return t;
  }
  if (cat == Category::AttnK) return m.n_expert == 8 ? Q::Q8_0 : t;
  if (cat == Category::FfnDown) {
    int64_t i = walk.i_ffn_down++;
    const int64_t n = m.n_layer;
    if (m.n_expert > 1) {
      // Expert tensors are not in layer order in every file: the layer comes from the name.
      int layer = -1;
      if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1 || layer < 0 || layer >= n)
        throw_error("{}: cannot tell its layer (of {}) for the {} mix", name, n, info(p).name);
      i = layer;
    }
    if (p == P::Q2_K) t = Q::Q3_K;
    else if (p == P::Q2_K_S) { if (i < n / 8) t = Q::Q4_K; }
    else if (p == P::Q3_K_M) t = i < n / 16 ? Q::Q5_K : Q::Q4_K;
    else if (p == P::Q3_K_L) t = Q::Q5_K;
    else if (p == P::Q4_K_M) { if (use_more_bits(i, n)) t = Q::Q6_K; }
    else if (p == P::IQ4_NL && i < n / 8) t = Q::Q5_K;  // without an importance matrix
    else if (p == P::Q5_K_M && use_more_bits(i, n)) t = Q::Q6_K;
    else if (p == P::Q4_K_S && i < n / 8) t = Q::Q5_K;
    return t;
  }
  if (cat == Category::AttnOutput) {
    if (m.n_expert == 8) {
      if (p == P::Q2_K || p == P::Q3_K_S || p == P::Q3_K_M || p == P::IQ4_NL || p == P::Q4_K_S ||
          p == P::Q4_K_M)
        t = Q::Q5_K;
    } else if (p == P::Q2_K) {
      t = Q::Q3_K;
    } else if (p == P::Q3_K_M) {
      t = Q::Q4_K;
    } else if (p == P::Q3_K_L) {
      t = Q::Q5_K;
    }
    return t;
  }
  return t;
}

// llama.cpp's replacement for a format whose blocks do not divide the rows.
std::optional<QuantType> fallback_for(QuantType t) {
  switch (t) {
    case QuantType::Q2_K:
    case QuantType::Q3_K: return QuantType::Q4_0;
    case QuantType::Q4_K: return QuantType::Q5_0;
    case QuantType::Q5_K: return QuantType::Q5_1;
    case QuantType::Q6_K: return QuantType::Q8_0;
    default: return std::nullopt;
  }
}

const char* category_label(Category c) {
  switch (c) {
    case Category::Output: return "output head";
    case Category::TokenEmbd: return "token embeddings";
    case Category::AttnV: return "attn_v";
    case Category::AttnK: return "attn_k";
    case Category::AttnQ: return "attn_q";
    case Category::AttnOutput: return "attn_output";
    case Category::FfnUp: return "ffn_up";
    case Category::FfnGate: return "ffn_gate";
    case Category::FfnDown: return "ffn_down";
    case Category::Other: return "other";
  }
  return "other";
}

}  // namespace

const char* preset_name(QuantPreset preset) { return info(preset).name; }
int32_t preset_file_type(QuantPreset preset) { return info(preset).file_type; }

ConvertTarget parse_convert_target(const std::string& name, bool pure) {
  ConvertTarget target;
  target.name = name;
  if (upper(name) == "KEEP") {
    if (pure) throw_error("--pure with --type keep: --pure takes a plain format to put everywhere");
    return target;
  }
  if (!pure)
    for (const PresetInfo& p : kPresets)
      if (upper(name) == p.name) {
        target.type = p.base;
        target.preset = p.preset;
        return target;
      }
  const auto t = quant_from_name(name);
  if (t && is_weight_format(*t)) {
    target.type = t;
    return target;
  }
  std::string presets;
  for (const PresetInfo& p : kPresets) presets += std::string(presets.empty() ? "" : ", ") + p.name;
  throw_error("--type {}: not a format jitllm can write: use keep, a llama-quantize preset, any "
              "case ({}; its per-tensor mix), or a plain format (f32, f16, bf16, q3_K, q4_K, q5_K, "
              "mxfp4, or a preset's name with --pure: every matrix in it){}",
              name, presets, pure ? "; --pure takes a plain format" : "");
}

std::vector<TensorChoice> plan_tensor_types(const ConvertSource& source, const ConvertTarget& target) {
  const bool hf = source.format == "hf";
  ModelShape m;
  m.arch = source.metadata.get_string_or("general.architecture", "");
  m.n_layer = first_of(source.metadata, m.arch + ".block_count", 0);
  m.n_head = first_of(source.metadata, m.arch + ".attention.head_count", 0);
  m.n_head_kv = first_of(source.metadata, m.arch + ".attention.head_count_kv", m.n_head);
  m.n_expert = first_of(source.metadata, m.arch + ".expert_count", 0);
  for (const SourceTensor& t : source.tensors) {
    if (t.name == "output.weight") m.tied_embeddings = false;
    if (category_of(t.name) == Category::AttnV) ++m.n_attention_wv;
  }

  Walk walk;
  std::vector<TensorChoice> plan;
  plan.reserve(source.tensors.size());
  for (const SourceTensor& t : source.tensors) {
    TensorChoice c;
    const std::string skip = not_quantized_because(t.name, t.shape);
    if (!target.type) {
      // Keep: an HF checkpoint's 1-D float tensors are stored as F32 (the kernels read them so).
      c.type = hf && t.shape.size() <= 1 && is_float(t.type) ? QuantType::F32 : t.type;
      if (c.type != t.type) c.reason = "1-D, stored as f32";
    } else if (!skip.empty()) {
      c.type = is_float(t.type) ? QuantType::F32 : t.type;
      c.reason = "not quantized: " + skip;
    } else {
      QuantType want = *target.type;
      if (target.preset) {
        const Category cat = category_of(t.name);
        want = preset_type(*target.preset, want, cat, t.name, t.shape, m, walk);
        if (want != *target.type)
          c.reason = fmt::format("{}{} in the {} mix", category_label(cat),
                                 cat == Category::TokenEmbd && m.tied_embeddings ? " (the head too)" : "",
                                 preset_name(*target.preset));
      }
      const int64_t block = quant_traits(want).block_elems;
      if (t.shape[0] % block != 0) {
        const auto fallback = fallback_for(want);
        const QuantType next =
            fallback && t.shape[0] % quant_traits(*fallback).block_elems == 0 ? *fallback : QuantType::F16;
        c.reason = fmt::format("rows of {} do not divide into {} blocks of {}", t.shape[0],
                               quant_name(want), block);
        want = next;
      }
      c.type = want;
    }
    plan.push_back(std::move(c));
  }
  return plan;
}

}  // namespace jitllm
