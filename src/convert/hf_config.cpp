// config.json access for the HF architectures (see hf_arch.h): typed fields with errors naming
// the field, and the RoPE settings in both spellings (transformers 4's top-level rope_theta /
// rope_scaling, transformers 5's rope_parameters, per layer type or not).
#include <cmath>

#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {

std::optional<int64_t> config_int_opt(const nlohmann::json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return std::nullopt;
  // Unsigned and float values are range-checked before they become int64 (a bare cast would wrap
  // 2^64-1 to -1, and casting 1e300 is undefined).
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) throw_error("config.json: '{}' is {}, too large", key, u);
    return int64_t(u);
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9.0e18) return int64_t(d);
  }
  throw_error("config.json: '{}' should be an integer, got {}", key, it->dump());
}

int64_t config_int(const nlohmann::json& c, const char* key) {
  auto v = config_int_opt(c, key);
  if (!v) throw_error("config.json: '{}' is missing", key);
  if (*v < 0) throw_error("config.json: '{}' is negative ({})", key, *v);
  return *v;
}

std::optional<int64_t> config_int_in_opt(const nlohmann::json& c, const char* key, int64_t lo,
                                         int64_t hi) {
  auto v = config_int_opt(c, key);
  if (v && (*v < lo || *v > hi))
    throw_error("config.json: '{}' is {}, outside the supported range [{}, {}]", key, *v, lo, hi);
  return v;
}

int64_t config_int_in(const nlohmann::json& c, const char* key, int64_t lo, int64_t hi) {
  auto v = config_int_in_opt(c, key, lo, hi);
  if (!v) throw_error("config.json: '{}' is missing", key);
  return *v;
}

int64_t config_hparam(const nlohmann::json& c, const char* key) {
  return config_int_in(c, key, 1, kMaxHparam);
}
std::optional<int64_t> config_hparam_opt(const nlohmann::json& c, const char* key) {
  return config_int_in_opt(c, key, 1, kMaxHparam);
}

std::optional<double> config_number_opt(const nlohmann::json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw_error("config.json: '{}' should be a number, got {}", key, it->dump());
  return it->get<double>();
}

double config_number(const nlohmann::json& c, const char* key) {
  auto v = config_number_opt(c, key);
  if (!v) throw_error("config.json: '{}' is missing or null", key);
  return *v;
}

bool config_bool_or(const nlohmann::json& c, const char* key, bool fallback) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw_error("config.json: '{}' should be true or false, got {}", key, it->dump());
  return it->get<bool>();
}

std::optional<std::string> config_string_opt(const nlohmann::json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return std::nullopt;
  if (!it->is_string())
    throw_error("config.json: '{}' should be a string, got {}", key, it->dump());
  return it->get<std::string>();
}

int64_t config_head_dim(const nlohmann::json& c) {
  if (auto hd = config_hparam_opt(c, "head_dim")) return *hd;
  return config_hparam(c, "hidden_size") / config_hparam(c, "num_attention_heads");
}

// ---- RoPE --------------------------------------------------------------------------------------

namespace {

// transformers 5's rope_parameters, or transformers 4's rope_scaling (whichever is an object).
const nlohmann::json* rope_object(const nlohmann::json& c) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = c.find(key);
    if (it != c.end() && it->is_object()) return &*it;
  }
  return nullptr;
}

const nlohmann::json* layer_type_entry(const nlohmann::json* rp, const char* layer_type) {
  if (!rp) return nullptr;
  auto it = rp->find(layer_type);
  if (it == rp->end()) return nullptr;
  if (!it->is_object())
    throw_error("config.json: rope_parameters.{} should be an object, got {}", layer_type,
                it->dump());
  return &*it;
}

std::string type_of(const nlohmann::json* rp) {
  if (!rp) return "default";
  for (const char* key : {"rope_type", "type"}) {
    auto it = rp->find(key);
    if (it != rp->end() && it->is_string()) return it->get<std::string>();
  }
  return "default";
}

}  // namespace

const nlohmann::json* rope_parameters(const nlohmann::json& c) {
  const nlohmann::json* rp = rope_object(c);
  if (const nlohmann::json* full = layer_type_entry(rp, "full_attention")) return full;
  return rp;
}

const nlohmann::json* sliding_rope_parameters(const nlohmann::json& c) {
  return layer_type_entry(rope_object(c), "sliding_attention");
}

double rope_theta(const nlohmann::json& c) {
  if (auto v = config_number_opt(c, "rope_theta")) return *v;
  if (const nlohmann::json* rp = rope_parameters(c))
    if (auto v = config_number_opt(*rp, "rope_theta")) return *v;
  return 10000.0;
}

std::string rope_type(const nlohmann::json& c) { return type_of(rope_parameters(c)); }

std::string sliding_rope_type(const nlohmann::json& c) {
  return type_of(sliding_rope_parameters(c));
}

std::optional<double> rope_number_opt(const nlohmann::json& c, const char* key) {
  if (const nlohmann::json* rp = rope_parameters(c))
    if (auto v = config_number_opt(*rp, key)) return v;
  return config_number_opt(c, key);
}

}  // namespace jitllm
