// JitKernels::get_rows: table rows (token embeddings) dequantized to float, vectorized (AVX2 +
// F16C) for the formats embedding tables come in -- F32, F16, BF16, Q8_0, Q4_K, Q6_K -- with the
// reference dequantizer's arithmetic (quant/, built unfused), so the floats are bit-identical:
//  Q8_0: q * d;  Q4_K: (d * sc) * q - (dmin * m);  Q6_K: (d * sc) * q.
// Other formats run quant/'s dequantize_row. Prefill-sized lookups split tokens over the pool.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/jit_kernels.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace jitllm {

namespace {

constexpr int64_t kPoolMinElems = 65536;  // smaller lookups run on the caller alone

// 8 bytes as 8 int32 lanes.
inline __m256i u8x8_i(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Q8_0 block: fp16 d, 32 int8.
void dequant_q8_0(const uint8_t* row, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, row += 34, y += 32) {
    const __m256 d = _mm256_set1_ps(fp16_to_f32(load_u16(row)));
    for (int j = 0; j < 32; j += 8) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 2 + j)));
      _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
    }
  }
}

// Q4_K's 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
void k4_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K block (144 bytes): fp16 d, fp16 dmin, 12 scale bytes, 128 bytes of nibbles: each 32 bytes
// hold sub-block 2i in the low nibbles and 2i+1 in the high ones.
void dequant_q4_k(const uint8_t* row, float* y, int64_t nb) {
  const __m256i lo4 = _mm256_set1_epi32(0xF);
  for (int64_t b = 0; b < nb; ++b, row += 144) {
    const float d = fp16_to_f32(load_u16(row)), dmin = fp16_to_f32(load_u16(row + 2));
    const uint8_t* scales = row + 4;
    const uint8_t* q = row + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
      int sc, m;
      k4_scale_min(is, scales, sc, m);
      const __m256 d1 = _mm256_set1_ps(d * float(sc)), m1 = _mm256_set1_ps(dmin * float(m));
      k4_scale_min(is + 1, scales, sc, m);
      const __m256 d2 = _mm256_set1_ps(d * float(sc)), m2 = _mm256_set1_ps(dmin * float(m));
      for (int l = 0; l < 32; l += 8) {
        const __m256i v = u8x8_i(q + l);
        const __m256 ql = _mm256_cvtepi32_ps(_mm256_and_si256(v, lo4));
        const __m256 qh = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
        _mm256_storeu_ps(y + l, _mm256_sub_ps(_mm256_mul_ps(d1, ql), m1));
        _mm256_storeu_ps(y + 32 + l, _mm256_sub_ps(_mm256_mul_ps(d2, qh), m2));
      }
      y += 64;
    }
  }
}

// Q6_K block (210 bytes): 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales, fp16 d.
// Each half of 128 elements: element l (+32, +64, +96) from ql[l] / ql[l+32] low and high
// nibbles and bit pairs 0-1, 2-3, 4-5, 6-7 of qh[l]; one scale per 16 elements.
void dequant_q6_k(const uint8_t* row, float* y, int64_t nb) {
  const __m256i lo4 = _mm256_set1_epi32(0xF), three = _mm256_set1_epi32(3),
                bias = _mm256_set1_epi32(32);
  for (int64_t b = 0; b < nb; ++b, row += 210) {
    const float d = fp16_to_f32(load_u16(row + 208));
    const uint8_t* ql = row;
    const uint8_t* qh = row + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(row + 192);
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l += 8) {
        const int is = l / 16;
        const __m256i a = u8x8_i(ql + l), c = u8x8_i(ql + l + 32), h = u8x8_i(qh + l);
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(a, lo4),
                                           _mm256_slli_epi32(_mm256_and_si256(h, three), 4));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(c, lo4),
                                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), three), 4));
        const __m256i q3 = _mm256_or_si256(_mm256_srli_epi32(a, 4),
                                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 4), three), 4));
        const __m256i q4 = _mm256_or_si256(_mm256_srli_epi32(c, 4),
                                           _mm256_slli_epi32(_mm256_srli_epi32(h, 6), 4));
        const __m256i qs[4] = {q1, q2, q3, q4};
        for (int k = 0; k < 4; ++k) {
          const __m256 dk = _mm256_set1_ps(d * float(sc[is + 2 * k]));
          const __m256 qf = _mm256_cvtepi32_ps(_mm256_sub_epi32(qs[k], bias));
          _mm256_storeu_ps(y + l + 32 * k, _mm256_mul_ps(dk, qf));
        }
      }
    }
  }
}

void dequant_f16(const uint8_t* row, float* y, int64_t k) {
  const auto* h = reinterpret_cast<const uint16_t*>(row);
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < k; ++i) y[i] = fp16_to_f32(h[i]);
}

void dequant_bf16(const uint8_t* row, float* y, int64_t k) {
  const auto* h = reinterpret_cast<const uint16_t*>(row);
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
  for (; i < k; ++i) y[i] = bf16_to_f32(h[i]);
}

}  // namespace

void JitKernels::get_rows(QuantType type, const uint8_t* table, int64_t k, const int32_t* ids,
                          int64_t n, float* out) const {
  const int64_t block = quant_traits(type).block_elems;
  if (k % block != 0) return ref_.get_rows(type, table, k, ids, n, out);  // it names the error
  const size_t rb = row_bytes(type, k);
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint8_t* row = table + size_t(ids[t]) * rb;
      float* y = out + t * k;  // [k]
      switch (type) {
        case QuantType::F32: std::memcpy(y, row, size_t(k) * sizeof(float)); break;
        case QuantType::F16: dequant_f16(row, y, k); break;
        case QuantType::BF16: dequant_bf16(row, y, k); break;
        case QuantType::Q8_0: dequant_q8_0(row, y, k / 32); break;
        case QuantType::Q4_K: dequant_q4_k(row, y, k / 256); break;
        case QuantType::Q6_K: dequant_q6_k(row, y, k / 256); break;
        default: dequantize_row(type, row, y, k);
      }
    }
  };
  if (n * k < kPoolMinElems) return run(0, n);
  ThreadPool::global().parallel_for(n, 1, run);
}

}  // namespace jitllm
