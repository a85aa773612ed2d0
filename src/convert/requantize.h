// The conversion of a tensor's bytes from one format to another (which format each tensor gets:
// quant_mix.h).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/types.h"

namespace jitllm {

class ThreadPool;

// Converts a [rows, row_length] tensor from `from` to `to` row by row (dequantize to f32, then
// the reference quantize_row, which matches llama-quantize without an importance matrix).
// `dst` is resized to the output bytes. Throws for a format that cannot be dequantized. With a
// pool, rows are converted in parallel (same bytes).
void convert_tensor_data(QuantType from, QuantType to, const uint8_t* src, int64_t row_length,
                         int64_t rows, std::vector<uint8_t>& dst, ThreadPool* pool = nullptr);

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for a whole model stored mostly as `type`, or -1.
int32_t llama_file_type(QuantType type);

}  // namespace jitllm
