// Packed activations for the generated matmuls: the reference activation quantization re-done
// with AVX2 (same operations in the same order per element, so the same bytes: checked against
// quantize_activation in the tests), laid out as planes the kernels address with constant
// offsets: quants, float scales, per-32 int32 values, per-16 int16 sums.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/jit_matmul.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm::jit {

namespace {

size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

bool is_k_format(QuantType t) {
  return t == QuantType::Q2_K || t == QuantType::Q3_K || t == QuantType::Q4_K ||
         t == QuantType::Q5_K || t == QuantType::Q6_K;
}

// The constant folded into each 32-block's integer sum: weights stored with an offset (Q4_0's
// q - 8) contribute offset * sum(activation quants), subtracted here.
int bias_mul(QuantType type, Isa isa) {
  switch (type) {
    case QuantType::Q4_0: return 8;
    case QuantType::Q8_0: return 0;  // |w| . sign(a, w): no offset
    default: return 0;
  }
}

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 8 int32 -> 8 int8 stored at dst (values already in int8 range).
void store8(int8_t* dst, __m256i q) {
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i b = _mm_packs_epi16(w, w);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), b);
}

// ggml-cpu's AVX Q8_0 from_float for one block: d = amax / 127, q = round-half-even(x * 127 /
// amax) (see quant/activation.cpp). Returns the block sum of q.
int q8_0_block(const float* x, int8_t* qs, float* d_out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4], m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
  }
  const float amax = hmax(m);
  *d_out = fp16_to_f32(f32_to_fp16(amax / 127.f));
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
  __m256i sum = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));  // MXCSR: round half to even
    q = _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-128));
    sum = _mm256_add_epi32(sum, q);
    store8(qs + 8 * i, q);
  }
  return hsum_epi32(sum);
}

// quantize_q8_k for one super-block (first max-|x| element gives the sign of the scale).
void q8_k_block(const float* x, int8_t* qs, float* d_out, int32_t* s32, int16_t* s16) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < 32; ++i) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)));
  const float amax = hmax(m);
  if (amax == 0.0f) {
    std::memset(qs, 0, kQK_K);
    *d_out = 0.0f;
    for (int g = 0; g < 8; ++g) s32[g] = 0;
    for (int g = 0; g < 16; ++g) s16[g] = 0;
    return;
  }
  int j = 0;
  while (std::fabs(x[j]) != amax) ++j;
  const float iscale = -127.f / x[j];
  const __m256 is = _mm256_set1_ps(iscale);
  for (int g = 0; g < 16; ++g) {
    __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g), is));
    __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g + 8), is));
    q0 = _mm256_min_epi32(q0, _mm256_set1_epi32(127));
    q1 = _mm256_min_epi32(q1, _mm256_set1_epi32(127));
    store8(qs + 16 * g, q0);
    store8(qs + 16 * g + 8, q1);
    s16[g] = int16_t(hsum_epi32(_mm256_add_epi32(q0, q1)));
  }
  for (int g = 0; g < 8; ++g) s32[g] = s16[2 * g] + s16[2 * g + 1];
  *d_out = 1 / iscale;
}

}  // namespace

bool jit_matmul_supported(QuantType type) {
  return type == QuantType::Q8_0 || type == QuantType::Q4_0 || type == QuantType::Q4_K ||
         type == QuantType::Q6_K;
}

ActLayout act_layout(QuantType weight_type, int64_t k) {
  ActLayout l;
  l.k = k;
  const bool kq = is_k_format(weight_type);
  const int64_t nd = kq ? k / kQK_K : k / kQK;
  l.qs = 0;
  l.d = pad64(size_t(k));
  l.s32 = l.d + pad64(size_t(nd) * 4);
  l.s16 = l.s32 + pad64(size_t(k / 32) * 4);
  l.bytes = l.s16 + (kq ? pad64(size_t(k / 16) * 2) : 0);
  return l;
}

void pack_activation(QuantType weight_type, Isa isa, const float* x, int64_t k, int64_t n,
                     uint8_t* dst) {
  const ActLayout l = act_layout(weight_type, k);
  const bool kq = is_k_format(weight_type);
  const int mul = bias_mul(weight_type, isa);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* p = dst + size_t(t) * l.bytes;
    const float* xt = x + t * k;
    auto* qs = reinterpret_cast<int8_t*>(p + l.qs);
    auto* d = reinterpret_cast<float*>(p + l.d);
    auto* s32 = reinterpret_cast<int32_t*>(p + l.s32);
    if (kq) {
      auto* s16 = reinterpret_cast<int16_t*>(p + l.s16);
      for (int64_t i = 0; i < k / kQK_K; ++i)
        q8_k_block(xt + i * kQK_K, qs + i * kQK_K, d + i, s32 + 8 * i, s16 + 16 * i);
    } else {
      for (int64_t i = 0; i < k / kQK; ++i)
        s32[i] = -mul * q8_0_block(xt + i * kQK, qs + i * kQK, d + i);
    }
  }
}

void pack_activation_reference(QuantType weight_type, Isa isa, const float* x, int64_t k,
                               int64_t n, uint8_t* dst) {
  const ActLayout l = act_layout(weight_type, k);
  const bool kq = is_k_format(weight_type);
  const QuantType act_type = quant_traits(weight_type).vec_dot_type;
  std::vector<uint8_t> blocks(row_bytes(act_type, k));
  const int mul = bias_mul(weight_type, isa);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* p = dst + size_t(t) * l.bytes;
    auto* qs = reinterpret_cast<int8_t*>(p + l.qs);
    auto* d = reinterpret_cast<float*>(p + l.d);
    auto* s32 = reinterpret_cast<int32_t*>(p + l.s32);
    quantize_activation(weight_type, x + t * k, blocks.data(), k);
    if (kq) {
      const auto* b = reinterpret_cast<const BlockQ8_K*>(blocks.data());
      auto* s16 = reinterpret_cast<int16_t*>(p + l.s16);
      for (int64_t i = 0; i < k / kQK_K; ++i) {
        std::memcpy(qs + i * kQK_K, b[i].qs, kQK_K);
        d[i] = b[i].d;
        std::memcpy(s16 + i * 16, b[i].bsums, sizeof(b[i].bsums));
        for (int g = 0; g < 8; ++g) s32[i * 8 + g] = b[i].bsums[2 * g] + b[i].bsums[2 * g + 1];
      }
    } else {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blocks.data());
      for (int64_t i = 0; i < k / kQK; ++i) {
        std::memcpy(qs + i * kQK, b[i].qs, kQK);
        d[i] = fp16_to_f32(b[i].d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) sum += b[i].qs[j];
        s32[i] = -mul * sum;
      }
    }
  }
}

}  // namespace jitllm::jit
