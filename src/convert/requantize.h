// Which format each tensor gets in the .jlm, and the conversion of its bytes. Rules (as llama.cpp's
// converters): 1-D tensors, norms, the MoE router and position/type embeddings stay F32; other
// tensors get the requested format, or F16 when their rows do not divide into its blocks; without
// a requested format a GGUF's types are kept as they are, and an HF tensor keeps its float type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quant/types.h"

namespace jitllm {

class ThreadPool;

// Parses the --type argument: "keep" -> nullopt; a weight format name ("q8_0", "f16", "bf16",
// "f32", "q4_K", ...) -> it. Throws naming the value and listing the accepted names.
std::optional<QuantType> parse_target_type(const std::string& name);

// Format of tensor `name` ([shape], stored as `source`) in the output.
// `source_is_float_checkpoint`: an HF checkpoint, whose 1-D tensors become F32 even when kept.
QuantType choose_tensor_type(const std::string& name, const std::vector<int64_t>& shape,
                             QuantType source, std::optional<QuantType> target,
                             bool source_is_float_checkpoint);

// Converts a [rows, row_length] tensor from `from` to `to` row by row (dequantize to f32, then
// the reference quantize_row, which matches llama-quantize without an importance matrix).
// `dst` is resized to the output bytes. Throws for a format that cannot be dequantized. With a
// pool, rows are converted in parallel (same bytes).
void convert_tensor_data(QuantType from, QuantType to, const uint8_t* src, int64_t row_length,
                         int64_t rows, std::vector<uint8_t>& dst, ThreadPool* pool = nullptr);

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for a whole model stored mostly as `type`, or -1.
int32_t llama_file_type(QuantType type);

}  // namespace jitllm
