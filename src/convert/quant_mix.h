// The format of every tensor of a conversion, planned over the whole model at once: a plain
// format (`--type q4_K`, every weight matrix in it) or one of llama-quantize's presets
// (`--type Q4_K_M`), whose per-tensor mix (the output head, attn_v and ffn_down of chosen layers
// with more bits, fallbacks for rows that do not divide into blocks) follows llama.cpp's
// llama_tensor_get_type as of b10472, so a preset gives llama-quantize's types and, without an
// importance matrix, its bytes. Each choice carries the reason the summary prints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "convert/source.h"
#include "quant/types.h"

namespace jitllm {

// llama-quantize's presets (LLAMA_FTYPE_MOSTLY_*) that jitllm can write.
enum class QuantPreset {
  Q2_K, Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M,
  Q6_K, Q8_0, IQ4_NL, MXFP4_MOE,
};

struct ConvertTarget {
  std::optional<QuantType> type;      // the base format; nullopt = keep the source's formats
  std::optional<QuantPreset> preset;  // set: llama-quantize's mix around `type`
  std::string name;                   // as the user wrote it, for messages and provenance
};

// --type: "keep"; a preset name in any case ("Q4_K_M", "q8_0"); or a plain format ("q4_K",
// "f16", "bf16", ...). A name that is both (q8_0, q6_K, q4_0 ...) is the preset unless `pure`,
// as with llama-quantize (--pure: every weight matrix in the format). Throws naming the value
// and listing the accepted names.
ConvertTarget parse_convert_target(const std::string& name, bool pure = false);

const char* preset_name(QuantPreset preset);
// llama.cpp's general.file_type for the preset.
int32_t preset_file_type(QuantPreset preset);

struct TensorChoice {
  QuantType type = QuantType::F32;
  // Why `type`: "" when it is the target's base format (or the source's, when keeping), else a
  // short phrase ("output head", "attn_v, more bits", "rows of 100 do not divide into q4_K
  // blocks of 256", "not quantized: norm" ...).
  std::string reason;
};

// One choice per source tensor, in the source's order. The counters llama.cpp keeps while it
// walks the tensors (which attn_v and ffn_down get more bits) are computed the same way.
std::vector<TensorChoice> plan_tensor_types(const ConvertSource& source, const ConvertTarget& target);

}  // namespace jitllm
