// Reference kernels of the 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL, MXFP4.
// Dequantize and quantize reproduce ggml-base's reference functions bit for bit (llama-quantize
// without an importance matrix); dot products follow ggml-cpu: an exact integer dot product per
// block, then one float scale per block. No SIMD here: generated kernels are checked against this.
#include <cfloat>
#include <cmath>

#include "quant/ref_kernels.h"

namespace jitllm::quant_ref {

namespace {

// Element j of a block sits in the low nibble of byte j (j < 16) or the high nibble of byte j-16.
inline int low_nibble(uint8_t b) { return b & 0x0F; }
inline int high_nibble(uint8_t b) { return b >> 4; }

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Signed value of largest magnitude in xs[0..n) (the first one on ties), as ggml's scale choice.
inline float signed_absmax(const float* xs, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(xs[j])) {
      amax = std::fabs(xs[j]);
      max = xs[j];
    }
  }
  return max;
}

inline void min_max(const float* xs, int n, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (xs[j] < min) min = xs[j];
    if (xs[j] > max) max = xs[j];
  }
}

// Index of the IQ4_NL level nearest to x, with ggml's best_index_int8 tie rule. ggml binary-
// searches for lo < hi with values[lo] <= x < values[hi]; hi is then the number of levels <= x,
// which a branch-free count finds faster (the searches below call this ~500 times per block).
int nearest_iq4nl(float x) {
  static constexpr float kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};
  if (x <= kLevels[0]) return 0;
  if (x >= kLevels[15]) return 15;
  int hi = 0;
  for (float level : kLevels) hi += level <= x ? 1 : 0;
  if (hi == 0) return 15;  // NaN, where ggml's search also ends at 15
  return x - kLevels[hi - 1] < kLevels[hi] - x ? hi - 1 : hi;
}

// 2^(e-128): half of the E8M0 value, because the MXFP4 table holds doubled E2M1 levels.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Nearest MXFP4 level to x at scale d, by exhaustive search (first index wins ties).
int nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kValuesMXFP4[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kValuesMXFP4[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

// ---------------------------------------------------------------- dequantize

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(low_nibble(x[i].qs[j]) - 8) * d;
      y[j + kQK / 2] = float(high_nibble(x[i].qs[j]) - 8) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d), m = h2f(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(low_nibble(x[i].qs[j])) * d + m;
      y[j + kQK / 2] = float(high_nibble(x[i].qs[j])) * d + m;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) & 1) << 4, h1 = ((qh >> (j + 16)) & 1) << 4;
      y[j] = float((low_nibble(x[i].qs[j]) | h0) - 16) * d;
      y[j + kQK / 2] = float((high_nibble(x[i].qs[j]) | h1) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d), m = h2f(x[i].m);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) & 1) << 4, h1 = ((qh >> (j + 16)) & 1) << 4;
      y[j] = float(low_nibble(x[i].qs[j]) | h0) * d + m;
      y[j + kQK / 2] = float(high_nibble(x[i].qs[j]) | h1) * d + m;
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * float(kValuesIQ4NL[low_nibble(x[i].qs[j])]);
      y[j + kQK / 2] = d * float(kValuesIQ4NL[high_nibble(x[i].qs[j])]);
    }
  }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = e8m0_half(x[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(kValuesMXFP4[low_nibble(x[i].qs[j])]) * d;
      y[j + kQK / 2] = float(kValuesMXFP4[high_nibble(x[i].qs[j])]) * d;
    }
  }
}

// ---------------------------------------------------------------- quantize
// The `int(v + 8.5f)` style conversions truncate, as ggml's (int8_t) casts do; the + 0.5 makes
// them round half up.

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;  // the extreme value maps to level -8 exactly
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, int(x[j] * id + 8.5f));
      const int q1 = std::min(15, int(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, kQK, min, max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    y[i].m = f2h(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, int((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, int((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, int(x[j] * id + 16.5f));
      const int q1 = std::min(31, int(x[j + kQK / 2] * id + 16.5f));
      y[i].qs[j] = uint8_t((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= uint32_t(q0 >> 4) << j;
      qh |= uint32_t(q1 >> 4) << (j + kQK / 2);
    }
    store_u32(y[i].qh, qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, kQK, min, max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    y[i].m = f2h(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      // ggml does not clamp here: (max - min) * id rounds to at most 31.000004.
      const int q0 = uint8_t(int((x[j] - min) * id + 0.5f));
      const int q1 = uint8_t(int((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = uint8_t((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= uint32_t((q0 >> 4) & 1) << j;
      qh |= uint32_t((q1 >> 4) & 1) << (j + kQK / 2);
    }
    store_u32(y[i].qh, qh);
  }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(std::round(x[j] * id));  // half away from 0
  }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = int8_t(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f2h(float(sum) * d);
  }
}

// llama-quantize's IQ4_NL (ggml's quantize_iq4_nl without an importance matrix, ntry = 7): try 15
// scales around -max/127 weighted by x^2, keep the one that maximises sumqx^2/sumq2, then
// re-assign every element to its nearest level at that (float, not fp16) scale.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  constexpr int kTries = 7;
  const int8_t* values = kValuesIQ4NL;  // kLevels in nearest_iq4nl, as floats
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    float d = 0.0f;
    if (!(amax < 1e-15f)) {  // GROUP_MAX_EPS: smaller groups quantize to zero
      float weight[kQK];
      for (int j = 0; j < kQK; ++j) weight[j] = x[j] * x[j];
      // Score of the levels nearest to x * id: (sumqx, sumq2), best scale = sumqx / sumq2.
      auto score = [&](float id, float& sumqx, float& sumq2) {
        sumqx = sumq2 = 0;
        for (int j = 0; j < kQK; ++j) {
          const float q = values[nearest_iq4nl(id * x[j])];
          sumqx += weight[j] * q * x[j];
          sumq2 += weight[j] * q * q;
        }
      };
      float sumqx, sumq2;
      d = -max / values[0];
      score(1 / d, sumqx, sumq2);
      d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
      float best = d * sumqx;
      for (int itry = -kTries; itry <= kTries; ++itry) {
        score(float(itry + values[0]) / max, sumqx, sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
    }
    y[i].d = f2h(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint8_t level[kQK];
    for (int j = 0; j < kQK; ++j) level[j] = uint8_t(nearest_iq4nl(id * x[j]));
    for (int j = 0; j < kQK / 2; ++j) y[i].qs[j] = uint8_t(level[j] | (level[j + kQK / 2] << 4));
  }
}

void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    // Shared exponent: the largest level (6 = 2^2 * 1.5) must cover amax's binade. Below 2^-125
    // ggml's cast of a negative exponent to uint8_t wraps (undefined; on x86 it gives scales
    // near 2^100); we clamp to e = 0 instead. Identical for every amax >= 2^-125.
    const uint8_t e =
        amax > 0.0f ? uint8_t(std::max(0, int(std::floor(std::log2(amax)) - 2 + 127))) : uint8_t(0);
    const float d = e8m0_half(e);
    y[i].e = e;
    for (int j = 0; j < kQK / 2; ++j)
      y[i].qs[j] = uint8_t(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[j + kQK / 2], d) << 4));
  }
}

// ---------------------------------------------------------------- dot products

float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sum_lo = 0, sum_hi = 0;  // two accumulators let the compiler vectorize
    for (int j = 0; j < kQK / 2; ++j) {
      sum_lo += (low_nibble(x[i].qs[j]) - 8) * y[i].qs[j];
      sum_hi += (high_nibble(x[i].qs[j]) - 8) * y[i].qs[j + kQK / 2];
    }
    sum += float(sum_lo + sum_hi) * (h2f(x[i].d) * h2f(y[i].d));
  }
  return sum;
}

float dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sum_lo = 0, sum_hi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sum_lo += low_nibble(x[i].qs[j]) * y[i].qs[j];
      sum_hi += high_nibble(x[i].qs[j]) * y[i].qs[j + kQK / 2];
    }
    // The min term uses the activation's stored block sum s = d_y * sum(q_y).
    sum += (h2f(x[i].d) * h2f(y[i].d)) * float(sum_lo + sum_hi) + h2f(x[i].m) * h2f(y[i].s);
  }
  return sum;
}

float dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_u32(x[i].qh);
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (low_nibble(x[i].qs[j]) | (((qh >> j) & 1) << 4)) - 16;
      const int q1 = (high_nibble(x[i].qs[j]) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + kQK / 2];
    }
    sum += (h2f(x[i].d) * h2f(y[i].d)) * float(isum);
  }
  return sum;
}

float dot_q5_1_q8_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_u32(x[i].qh);
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = low_nibble(x[i].qs[j]) | (((qh >> j) & 1) << 4);
      const int q1 = high_nibble(x[i].qs[j]) | (((qh >> (j + 16)) & 1) << 4);
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + kQK / 2];
    }
    sum += (h2f(x[i].d) * h2f(y[i].d)) * float(isum) + h2f(x[i].m) * h2f(y[i].s);
  }
  return sum;
}

float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += x[i].qs[j] * y[i].qs[j];
    sum += float(isum) * (h2f(x[i].d) * h2f(y[i].d));
  }
  return sum;
}

namespace {

// IQ4_NL and MXFP4 share one layout: 16 bytes of 4-bit indices into a table of int8 levels (low
// nibbles are elements 0..15, high nibbles 16..31) and one scale per block.
template <typename Block, typename Scale>
float dot_table4_q8_0(const Block* x, const BlockQ8_0* y, int64_t nb, const int8_t* levels,
                      Scale block_scale) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += y[i].qs[j] * levels[low_nibble(x[i].qs[j])];
      isum += y[i].qs[j + kQK / 2] * levels[high_nibble(x[i].qs[j])];
    }
    sum += (h2f(y[i].d) * block_scale(x[i])) * float(isum);
  }
  return sum;
}

}  // namespace

float dot_iq4_nl_q8_0(const BlockIQ4_NL* x, const BlockQ8_0* y, int64_t nb) {
  return dot_table4_q8_0(x, y, nb, kValuesIQ4NL, [](const BlockIQ4_NL& b) { return h2f(b.d); });
}

float dot_mxfp4_q8_0(const BlockMXFP4* x, const BlockQ8_0* y, int64_t nb) {
  return dot_table4_q8_0(x, y, nb, kValuesMXFP4,
                         [](const BlockMXFP4& b) { return e8m0_half(b.e); });
}

}  // namespace jitllm::quant_ref
