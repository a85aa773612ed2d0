// quant.h's entry points: validates type and length, then dispatches to the per-format reference
// kernels (block32.cpp, kquants.cpp, kquant_dot.cpp, activation.cpp). The plain float formats
// (F32, F16, BF16) are handled here directly.
#include "quant/quant.h"

#include <cstring>

#include "core/error.h"
#include "quant/ref_kernels.h"

namespace jitllm {

namespace {

using Q = QuantType;
namespace r = quant_ref;

// Throws unless `type` is a format this file implements and `n` a whole number of its blocks;
// returns the number of blocks.
int64_t blocks_of(QuantType type, int64_t n, const char* what) {
  const QuantTraits& t = quant_traits(type);  // throws for unknown ids
  if (!t.supported)
    throw_error("{}: tensor type {} is not supported", what, t.name);
  if (n < 0 || n % t.block_elems != 0)
    throw_error("{}: a row of {} elements is not a whole number of {} blocks ({} elements each)",
                what, n, t.name, t.block_elems);
  return n / t.block_elems;
}

template <typename T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}
template <typename T>
T* as(void* p) {
  return static_cast<T*>(p);
}

// Float dot products accumulate in double: ggml's SIMD float lanes differ from the exact result
// by ~1e-7 relative; double keeps ours closer to exact than that, which is all a reference needs.
float dot_f32(const float* w, const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(w[i]) * double(x[i]);
  return float(sum);
}
float dot_f16(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(fp16_to_f32(w[i])) * double(fp16_to_f32(x[i]));
  return float(sum);
}
float dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(bf16_to_f32(w[i])) * double(bf16_to_f32(x[i]));
  return float(sum);
}

}  // namespace

void dequantize_row(QuantType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = blocks_of(type, n, "dequantize_row");
  switch (type) {
    case Q::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case Q::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(as<uint16_t>(src)[i]);
      return;
    case Q::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(as<uint16_t>(src)[i]);
      return;
    case Q::Q4_0: return r::dequantize_q4_0(as<BlockQ4_0>(src), dst, nb);
    case Q::Q4_1: return r::dequantize_q4_1(as<BlockQ4_1>(src), dst, nb);
    case Q::Q5_0: return r::dequantize_q5_0(as<BlockQ5_0>(src), dst, nb);
    case Q::Q5_1: return r::dequantize_q5_1(as<BlockQ5_1>(src), dst, nb);
    case Q::Q8_0: return r::dequantize_q8_0(as<BlockQ8_0>(src), dst, nb);
    case Q::Q8_1: return r::dequantize_q8_1(as<BlockQ8_1>(src), dst, nb);
    case Q::IQ4_NL: return r::dequantize_iq4_nl(as<BlockIQ4_NL>(src), dst, nb);
    case Q::MXFP4: return r::dequantize_mxfp4(as<BlockMXFP4>(src), dst, nb);
    case Q::Q2_K: return r::dequantize_q2_k(as<BlockQ2_K>(src), dst, nb);
    case Q::Q3_K: return r::dequantize_q3_k(as<BlockQ3_K>(src), dst, nb);
    case Q::Q4_K: return r::dequantize_q4_k(as<BlockQ4_K>(src), dst, nb);
    case Q::Q5_K: return r::dequantize_q5_k(as<BlockQ5_K>(src), dst, nb);
    case Q::Q6_K: return r::dequantize_q6_k(as<BlockQ6_K>(src), dst, nb);
    case Q::Q8_K: return r::dequantize_q8_k(as<BlockQ8_K>(src), dst, nb);
    default: break;
  }
  throw_error("dequantize_row: no reference kernel for {}", quant_name(type));
}

void quantize_row(QuantType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = blocks_of(type, n, "quantize_row");
  switch (type) {
    case Q::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case Q::F16:
      for (int64_t i = 0; i < n; ++i) as<uint16_t>(dst)[i] = f32_to_fp16(src[i]);
      return;
    case Q::BF16:
      for (int64_t i = 0; i < n; ++i) as<uint16_t>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case Q::Q4_0: return r::quantize_q4_0(src, as<BlockQ4_0>(dst), nb);
    case Q::Q4_1: return r::quantize_q4_1(src, as<BlockQ4_1>(dst), nb);
    case Q::Q5_0: return r::quantize_q5_0(src, as<BlockQ5_0>(dst), nb);
    case Q::Q5_1: return r::quantize_q5_1(src, as<BlockQ5_1>(dst), nb);
    case Q::Q8_0: return r::quantize_q8_0(src, as<BlockQ8_0>(dst), nb);
    case Q::Q8_1: return r::quantize_q8_1(src, as<BlockQ8_1>(dst), nb);
    case Q::IQ4_NL: return r::quantize_iq4_nl(src, as<BlockIQ4_NL>(dst), nb);
    case Q::MXFP4: return r::quantize_mxfp4(src, as<BlockMXFP4>(dst), nb);
    case Q::Q2_K: return r::quantize_q2_k(src, as<BlockQ2_K>(dst), nb);
    case Q::Q3_K: return r::quantize_q3_k(src, as<BlockQ3_K>(dst), nb);
    case Q::Q4_K: return r::quantize_q4_k(src, as<BlockQ4_K>(dst), nb);
    case Q::Q5_K: return r::quantize_q5_k(src, as<BlockQ5_K>(dst), nb);
    case Q::Q6_K: return r::quantize_q6_k(src, as<BlockQ6_K>(dst), nb);
    case Q::Q8_K: return r::quantize_q8_k(src, as<BlockQ8_K>(dst), nb);
    default: break;
  }
  throw_error("quantize_row: no reference quantizer for {}", quant_name(type));
}

void quantize_activation(QuantType weight_type, const float* x, void* scratch, int64_t n) {
  const QuantType act = quant_traits(weight_type).vec_dot_type;
  blocks_of(weight_type, n, "quantize_activation");
  const int64_t nb = blocks_of(act, n, "quantize_activation");
  switch (act) {
    case Q::Q8_0: return r::activation_q8_0(x, as<BlockQ8_0>(scratch), nb);
    case Q::Q8_1: return r::activation_q8_1(x, as<BlockQ8_1>(scratch), nb);
    default: return quantize_row(act, x, scratch, n);  // F32/F16/BF16/Q8_K: same as the reference
  }
}

float vec_dot(QuantType type, int64_t n, const void* weight_row, const void* activation) {
  const int64_t nb = blocks_of(type, n, "vec_dot");
  const void* w = weight_row;
  const void* a = activation;
  switch (type) {
    case Q::F32: return dot_f32(as<float>(w), as<float>(a), n);
    case Q::F16: return dot_f16(as<uint16_t>(w), as<uint16_t>(a), n);
    case Q::BF16: return dot_bf16(as<uint16_t>(w), as<uint16_t>(a), n);
    case Q::Q4_0: return r::dot_q4_0_q8_0(as<BlockQ4_0>(w), as<BlockQ8_0>(a), nb);
    case Q::Q4_1: return r::dot_q4_1_q8_1(as<BlockQ4_1>(w), as<BlockQ8_1>(a), nb);
    case Q::Q5_0: return r::dot_q5_0_q8_0(as<BlockQ5_0>(w), as<BlockQ8_0>(a), nb);
    case Q::Q5_1: return r::dot_q5_1_q8_1(as<BlockQ5_1>(w), as<BlockQ8_1>(a), nb);
    case Q::Q8_0: return r::dot_q8_0_q8_0(as<BlockQ8_0>(w), as<BlockQ8_0>(a), nb);
    case Q::IQ4_NL: return r::dot_iq4_nl_q8_0(as<BlockIQ4_NL>(w), as<BlockQ8_0>(a), nb);
    case Q::MXFP4: return r::dot_mxfp4_q8_0(as<BlockMXFP4>(w), as<BlockQ8_0>(a), nb);
    case Q::Q2_K: return r::dot_q2_k_q8_k(as<BlockQ2_K>(w), as<BlockQ8_K>(a), nb);
    case Q::Q3_K: return r::dot_q3_k_q8_k(as<BlockQ3_K>(w), as<BlockQ8_K>(a), nb);
    case Q::Q4_K: return r::dot_q4_k_q8_k(as<BlockQ4_K>(w), as<BlockQ8_K>(a), nb);
    case Q::Q5_K: return r::dot_q5_k_q8_k(as<BlockQ5_K>(w), as<BlockQ8_K>(a), nb);
    case Q::Q6_K: return r::dot_q6_k_q8_k(as<BlockQ6_K>(w), as<BlockQ8_K>(a), nb);
    default: break;
  }
  throw_error("vec_dot: {} rows have no dot product (it is an activation-only format)",
              quant_name(type));
}

}  // namespace jitllm
