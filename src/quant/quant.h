// Reference (plain C++) conversions and dot products for every supported format. These are the
// oracle for generated kernels and their fallback; they match ggml's reference functions bit for
// bit where ggml's are deterministic (dequantize, quantize_row_*_ref, vec_dot).
//
// Rows are in GGUF block layout; `n` is the number of elements and must be a multiple of the
// format's block size (checked, throws jitllm::Error).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace jitllm {

// src: row_bytes(type, n) bytes -> dst: n floats.
void dequantize_row(QuantType type, const void* src, float* dst, int64_t n);

// src: n floats -> dst: row_bytes(type, n) bytes. Same bytes as ggml's quantize_row_<type>_ref
// (llama-quantize without an importance matrix). Works for every weight format and for the
// activation formats Q8_0, Q8_1, Q8_K. For IQ4_NL this is llama-quantize's search (ggml's
// quantize_iq4_nl, 15 candidate scales), not ggml's quantize_row_iq4_nl_ref (1 candidate).
// Q8_0/Q8_1 here are the model-file quantizers; quantize_activation's rounding differs.
void quantize_row(QuantType type, const float* src, void* dst, int64_t n);

// Dot product of one weight row (format `type`) with an activation already converted to
// quant_traits(type).vec_dot_type (row_bytes(vec_dot_type, n) bytes), as ggml-cpu computes it.
float vec_dot(QuantType type, int64_t n, const void* weight_row, const void* activation);

// Convenience: converts the float activation `x` (n floats) to the vec_dot type in `scratch`
// (at least row_bytes(vec_dot_type, n) bytes) the way ggml-cpu does (from_float).
void quantize_activation(QuantType weight_type, const float* x, void* scratch, int64_t n);

}  // namespace jitllm
