// Tensor element formats, numbered as ggml's ggml_type (the numbers are stored in GGUF and .jlm
// files; do not renumber). Block layouts are byte-identical to GGUF's; see formats.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace jitllm {

enum class QuantType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct QuantTraits {
  QuantType type;
  const char* name;        // ggml's name: "q4_K", "f16", ...
  int64_t block_elems;     // elements per block (1 for plain types)
  size_t block_bytes;      // bytes per block
  QuantType vec_dot_type;  // format the activation is converted to for dot products (llama.cpp's)
  bool supported;          // jitllm can dequantize and compute with it
};

// Traits of a known type; nullptr for a number that is not a ggml type.
const QuantTraits* quant_traits(uint32_t type_id);
const QuantTraits& quant_traits(QuantType type);  // throws for unknown types
const char* quant_name(QuantType type);
// Parses "q4_K", "Q4_K", "f16", "bf16" ... (case-insensitive); nullopt if unknown.
std::optional<QuantType> quant_from_name(std::string_view name);

// Bytes of a row of `n` elements; throws if n is not a multiple of the block size.
size_t row_bytes(QuantType type, int64_t n);

}  // namespace jitllm
