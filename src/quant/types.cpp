#include "quant/types.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"

namespace jitllm {

namespace {

using Q = QuantType;

// Block sizes and bytes are the GGUF on-disk facts; vec_dot_type is llama.cpp's ggml-cpu choice.
constexpr std::array kTraits = {
    QuantTraits{Q::F32, "f32", 1, 4, Q::F32, true},
    QuantTraits{Q::F16, "f16", 1, 2, Q::F16, true},
    QuantTraits{Q::Q4_0, "q4_0", 32, 18, Q::Q8_0, true},
    QuantTraits{Q::Q4_1, "q4_1", 32, 20, Q::Q8_1, true},
    QuantTraits{Q::Q5_0, "q5_0", 32, 22, Q::Q8_0, true},
    QuantTraits{Q::Q5_1, "q5_1", 32, 24, Q::Q8_1, true},
    QuantTraits{Q::Q8_0, "q8_0", 32, 34, Q::Q8_0, true},
    QuantTraits{Q::Q8_1, "q8_1", 32, 36, Q::Q8_1, true},
    QuantTraits{Q::Q2_K, "q2_K", 256, 84, Q::Q8_K, true},
    QuantTraits{Q::Q3_K, "q3_K", 256, 110, Q::Q8_K, true},
    QuantTraits{Q::Q4_K, "q4_K", 256, 144, Q::Q8_K, true},
    QuantTraits{Q::Q5_K, "q5_K", 256, 176, Q::Q8_K, true},
    QuantTraits{Q::Q6_K, "q6_K", 256, 210, Q::Q8_K, true},
    QuantTraits{Q::Q8_K, "q8_K", 256, 292, Q::Q8_K, true},
    QuantTraits{Q::IQ2_XXS, "iq2_xxs", 256, 66, Q::Q8_K, false},
    QuantTraits{Q::IQ2_XS, "iq2_xs", 256, 74, Q::Q8_K, false},
    QuantTraits{Q::IQ3_XXS, "iq3_xxs", 256, 98, Q::Q8_K, false},
    QuantTraits{Q::IQ1_S, "iq1_s", 256, 50, Q::Q8_K, false},
    QuantTraits{Q::IQ4_NL, "iq4_nl", 32, 18, Q::Q8_0, true},
    QuantTraits{Q::IQ3_S, "iq3_s", 256, 110, Q::Q8_K, false},
    QuantTraits{Q::IQ2_S, "iq2_s", 256, 82, Q::Q8_K, false},
    QuantTraits{Q::IQ4_XS, "iq4_xs", 256, 136, Q::Q8_K, false},
    QuantTraits{Q::I8, "i8", 1, 1, Q::I8, false},
    QuantTraits{Q::I16, "i16", 1, 2, Q::I16, false},
    QuantTraits{Q::I32, "i32", 1, 4, Q::I32, false},
    QuantTraits{Q::I64, "i64", 1, 8, Q::I64, false},
    QuantTraits{Q::F64, "f64", 1, 8, Q::F64, false},
    QuantTraits{Q::IQ1_M, "iq1_m", 256, 56, Q::Q8_K, false},
    QuantTraits{Q::BF16, "bf16", 1, 2, Q::BF16, true},
    QuantTraits{Q::TQ1_0, "tq1_0", 256, 54, Q::Q8_K, false},
    QuantTraits{Q::TQ2_0, "tq2_0", 256, 66, Q::Q8_K, false},
    QuantTraits{Q::MXFP4, "mxfp4", 32, 17, Q::Q8_0, true},
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const QuantTraits* quant_traits(uint32_t type_id) {
  for (const auto& t : kTraits)
    if (uint32_t(t.type) == type_id) return &t;
  return nullptr;
}

const QuantTraits& quant_traits(QuantType type) {
  const QuantTraits* t = quant_traits(uint32_t(type));
  if (!t) throw_error("unknown tensor type {}", uint32_t(type));
  return *t;
}

const char* quant_name(QuantType type) {
  const QuantTraits* t = quant_traits(uint32_t(type));
  return t ? t->name : "unknown";
}

std::optional<QuantType> quant_from_name(std::string_view name) {
  for (const auto& t : kTraits)
    if (iequals(t.name, name)) return t.type;
  return std::nullopt;
}

size_t row_bytes(QuantType type, int64_t n) {
  const QuantTraits& t = quant_traits(type);
  if (n < 0 || n % t.block_elems != 0)
    throw_error("a row of {} elements is not a whole number of {} blocks ({} elements each)", n,
                t.name, t.block_elems);
  return size_t(n / t.block_elems) * t.block_bytes;
}

}  // namespace jitllm
