// The -ctk/-ctv/-fa checks (see attention_flags.h).
#include "runtime/attention_flags.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace jitllm {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

QuantType kv_cache_type(const std::string& type_k, const std::string& type_v) {
  const std::string k = lower(type_k), v = lower(type_v);
  for (const auto& [flag, t] : {std::pair{"--cache-type-k (-ctk)", k}, std::pair{"--cache-type-v (-ctv)", v}})
    if (t != "f16" && t != "f32")
      throw_error("{} {}: jitllm's KV cache is f16 (default) or f32; a quantized KV cache is not "
                  "supported yet", flag, t);
  if (k != v)
    throw_error("-ctk {} -ctv {}: jitllm keeps K and V in one type; give the same to both", k, v);
  return k == "f32" ? QuantType::F32 : QuantType::F16;
}

void check_flash_attn(const std::string& value) {
  const std::string v = lower(value);
  if (v == "on" || v == "auto" || v == "1" || v == "true" || v.empty()) return;
  if (v == "off" || v == "0" || v == "false")
    throw_error("--flash-attn (-fa) off: jitllm has one attention path, fused like flash "
                "attention; there is no unfused one to switch to");
  throw_error("--flash-attn (-fa) {}: use on, off or auto", value);
}

}  // namespace jitllm
