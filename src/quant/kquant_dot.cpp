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

// Q4_K/Q5_K share the scale layout; `level(j)` gives the 0..15 / 0..31 level of element j.
template <typename Block, typename Level>
float dot_affine_k(const Block* x, const BlockQ8_K* y, int64_t nb, Level level) {
  float sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0, sum_mins = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, mn;
      k4_scale_min(g, x[i].scales, sc, mn);
      int group = 0;
      for (int l = 32 * g; l < 32 * g + 32; ++l) group += y[i].qs[l] * level(x[i], l);
      isum += sc * group;
      sum_mins += mn * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
    }
    const float d = h2f(x[i].d) * y[i].d;
    const float dmin = h2f(x[i].dmin) * y[i].d;
    sum += d * float(isum) - dmin * float(sum_mins);
  }
  return sum;
}

}  // namespace

float dot_q4_k_q8_k(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  // Element l: group g = l / 32; groups 2k and 2k+1 share bytes qs[32k..32k+31] (low, high nibble).
  return dot_affine_k(x, y, nb, [](const BlockQ4_K& b, int l) {
    const uint8_t byte = b.qs[32 * (l / 64) + l % 32];
    return (l / 32) % 2 == 0 ? byte & 0xF : byte >> 4;
  });
}

float dot_q5_k_q8_k(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
  return dot_affine_k(x, y, nb, [](const BlockQ5_K& b, int l) {
    const uint8_t byte = b.qs[32 * (l / 64) + l % 32];
    const int low = (l / 32) % 2 == 0 ? byte & 0xF : byte >> 4;
    const int high = (b.qh[l % 32] >> (l / 32)) & 1;  // bit l/32 of qh[l % 32]
    return low | (high << 4);
  });
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
      // Four 32-element quarters; each is two 16-element groups with their own scale.
      int quarter[4][2] = {};
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        quarter[0][l / 16] += q1 * q8[l];
        quarter[1][l / 16] += q2 * q8[l + 32];
        quarter[2][l / 16] += q3 * q8[l + 64];
        quarter[3][l / 16] += q4 * q8[l + 96];
      }
      for (int k = 0; k < 4; ++k) isum += sc[2 * k] * quarter[k][0] + sc[2 * k + 1] * quarter[k][1];
    }
    sum += (h2f(x[i].d) * y[i].d) * float(isum);
  }
  return sum;
}

}  // namespace jitllm::quant_ref
