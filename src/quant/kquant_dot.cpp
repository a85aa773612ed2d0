// Reference dot products of the K-quants with a Q8_K activation, as ggml-cpu computes them: per
// super-block, an exact integer sum of (weight level x activation quant x 6/8-bit group scale),
// scaled once by d_w * d_x; the weights' mins use the activation's 16-element sums (bsums), so
// they cost one multiply per group. Only the float accumulation across blocks can differ from
// ggml's SIMD order (~1e-6 relative).
#include "quant/ref_kernels.h"

namespace jitllm::quant_ref {

float dot_q2_k_q8_k(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* sc = x[i].scales;
    int sum_mins = 0;  // sum over groups of min6 * (sum of the group's activation quants)
    for (int j = 0; j < 16; ++j) sum_mins += y[i].bsums[j] * (sc[j] >> 4);
    int isum = 0;
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128, q2 += 32) {
      for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
        for (int half = 0; half < 2; ++half) {
          int group = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) group += q8[l] * ((q2[l] >> shift) & 3);
          isum += (sc[is++] & 0xF) * group;
        }
      }
    }
    const float dall = y[i].d * h2f(x[i].d);
    const float dmin = y[i].d * h2f(x[i].dmin);
    sum += dall * float(isum) - dmin * float(sum_mins);
  }
  return sum;
}

float dot_q3_k_q8_k(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t scales[16];
    q3k_scales(x[i].scales, scales);
    const uint8_t* q3 = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    const int8_t* q8 = y[i].qs;
    uint8_t m = 1;
    int isum = 0, is = 0;
    for (int n = 0; n < kQK_K; n += 128, q3 += 32) {
      for (int shift = 0; shift < 8; shift += 2, q8 += 32, m = uint8_t(m << 1)) {
        for (int half = 0; half < 2; ++half) {
          int group = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            group += q8[l] * (((q3[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          isum += (scales[is++] - 32) * group;
        }
      }
    }
    sum += (h2f(x[i].d) * y[i].d) * float(isum);
  }
  return sum;
}

namespace {

// Q4_K/Q5_K share the scale layout: chunk k (64 elements) is groups 2k (low nibbles of
// qs[32k..32k+31]) and 2k+1 (high nibbles); Q5_K adds bit 2k / 2k+1 of qh[l] as bit 4.
template <typename Block, bool kHasHighBit>
float dot_affine_k(const Block* x, const BlockQ8_K* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0, sum_mins = 0;
    for (int k = 0; k < 4; ++k) {
      const uint8_t* qs = x[i].qs + 32 * k;
      const int8_t* q8 = y[i].qs + 64 * k;
      int sum_lo = 0, sum_hi = 0;
      for (int l = 0; l < 32; ++l) {
        int lo = qs[l] & 0xF, hi = qs[l] >> 4;
        if constexpr (kHasHighBit) {
          lo |= ((x[i].qh[l] >> (2 * k)) & 1) << 4;
          hi |= ((x[i].qh[l] >> (2 * k + 1)) & 1) << 4;
        }
        sum_lo += lo * q8[l];
        sum_hi += hi * q8[l + 32];
      }
      uint8_t sc_lo, mn_lo, sc_hi, mn_hi;
      k4_scale_min(2 * k, x[i].scales, sc_lo, mn_lo);
      k4_scale_min(2 * k + 1, x[i].scales, sc_hi, mn_hi);
      isum += sc_lo * sum_lo + sc_hi * sum_hi;
      const int16_t* bs = y[i].bsums + 4 * k;  // 16-element sums: 2 per 32-element group
      sum_mins += mn_lo * (bs[0] + bs[1]) + mn_hi * (bs[2] + bs[3]);
    }
    const float d = h2f(x[i].d) * y[i].d;
    const float dmin = h2f(x[i].dmin) * y[i].d;
    sum += d * float(isum) - dmin * float(sum_mins);
  }
  return sum;
}

}  // namespace

float dot_q4_k_q8_k(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  return dot_affine_k<BlockQ4_K, false>(x, y, nb);
}

float dot_q5_k_q8_k(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
  return dot_affine_k<BlockQ5_K, true>(x, y, nb);
}

float dot_q6_k_q8_k(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[i].ql + 64 * half;
      const uint8_t* qh = x[i].qh + 32 * half;
      const int8_t* q8 = y[i].qs + 128 * half;
      const int8_t* sc = x[i].scales + 8 * half;
      // Four 32-element quarters (elements l, l+32, l+64, l+96 share ql/qh bytes); each quarter
      // is two 16-element groups with their own scale.
      for (int g = 0; g < 2; ++g) {
        int s1 = 0, s2 = 0, s3 = 0, s4 = 0;
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          s1 += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * q8[l];
          s2 += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[l + 32];
          s3 += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[l + 64];
          s4 += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[l + 96];
        }
        isum += sc[g] * s1 + sc[g + 2] * s2 + sc[g + 4] * s3 + sc[g + 6] * s4;
      }
    }
    sum += (h2f(x[i].d) * y[i].d) * float(isum);
  }
  return sum;
}

}  // namespace jitllm::quant_ref
