// Internal to src/quant: the per-format reference kernels behind quant.h's dispatch, and the
// numeric helpers they share. Counts are in blocks (`nb`), already validated by quant.cpp.
//
// Bit-exactness with ggml depends on the order and kind of every float operation. ggml's
// reference quantizers and dequantizers live in ggml-base, which is built without -march flags,
// so no multiply-add is fused there; the quant layer is compiled with -ffp-contract=off
// (top-level CMakeLists.txt) for the same reason (we build with -mfma).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "quant/formats.h"

namespace jitllm::quant_ref {

// ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even(fval) in the low mantissa
// bits. Valid for |fval| <= 2^22; differs from lrintf only in how it treats out-of-range values,
// which the callers never produce.
inline int nearest_int(float fval) {
  const float val = fval + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &val, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

inline float h2f(uint16_t h) { return fp16_to_f32(h); }
inline uint16_t f2h(float f) { return f32_to_fp16(f); }

// --- 32-element formats (block32.cpp) -------------------------------------------------------
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb);
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);
void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb);

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);  // ggml's _ref (model files)
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb);  // ggml's _ref
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);

float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb);
float dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb);
float dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb);
float dot_q5_1_q8_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb);
float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb);
float dot_iq4_nl_q8_0(const BlockIQ4_NL* x, const BlockQ8_0* y, int64_t nb);
float dot_mxfp4_q8_0(const BlockMXFP4* x, const BlockQ8_0* y, int64_t nb);

// --- K-quants (kquants.cpp, kquant_dot.cpp) -------------------------------------------------
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb);

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb);

float dot_q2_k_q8_k(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb);
float dot_q3_k_q8_k(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb);
float dot_q4_k_q8_k(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb);
float dot_q5_k_q8_k(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb);
float dot_q6_k_q8_k(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb);

// Unpacks the 6-bit scale and min of group j (0..7) of a Q4_K/Q5_K block's 12 scale bytes.
inline void k4_scale_min(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    min = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}
// Unpacks the 16 6-bit scales of a Q3_K block (still offset by 32).
inline void q3k_scales(const uint8_t* packed, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = int8_t(low | (high << 4));
  }
}

// --- activation conversion as ggml-cpu's from_float on x86 with AVX2 (activation.cpp) --------
void activation_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void activation_q8_1(const float* x, BlockQ8_1* y, int64_t nb);

}  // namespace jitllm::quant_ref
