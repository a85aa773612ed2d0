// Reference dequantize and quantize of the K-quants (Q2_K .. Q6_K) and of the Q8_K activation
// format, bit-exact with ggml-base's dequantize_row_* and quantize_row_*_ref (what llama-quantize
// writes without an importance matrix). The per-group scale searches (ggml's make_qx_quants,
// make_q3_quants, make_qkx2_quants) keep ggml's float operation order exactly: reordering a single
// sum changes which candidate scale wins and so the bytes. Dot products are in kquant_dot.cpp.
#include <algorithm>
#include <cmath>

#include "quant/ref_kernels.h"

namespace jitllm::quant_ref {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // groups whose |x| stays below this quantize to zero

inline int clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// The element of x[0..n) with the largest |value|, sign kept (the first one on ties), as ggml's
// scale searches pick it.
float largest_magnitude(const float* x, int n) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// Symmetric scale for a group (Q6_K: nmax 32, levels -32..31 stored as L + 32), searching 19
// candidate scales around -nmax/max with weights x^2 (ggml's make_qx_quants, rmse_type 1).
float search_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  const float max = largest_magnitude(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  // Sums of the weighted fit x ~ scale * l for the levels picked at inverse scale `iscale`.
  auto fit = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = int8_t(nmax + clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float sumlx, suml2;
  float iscale = float(-nmax) / max;
  fit(iscale, sumlx, suml2);
  assign(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    fit(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's group scale (ggml's make_q3_quants with do_rmse): start from -nmax/max, then up to 5
// passes of coordinate descent moving one level at a time while the weighted fit improves.
float search_q3_scale(int n, int nmax, const float* x, int8_t* L) {
  const float max = largest_magnitude(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = float(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = int8_t(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * float(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * float(L[i]) * float(L[i]);
        const int new_l = clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * float(new_l);
          sl2 += w * float(new_l) * float(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = int8_t(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Affine scale and min for a group (x ~ scale * l - min, l in 0..nmax), ggml's make_qkx2_quants:
// least-squares fits over nstep+1 candidate level assignments, keeping the one with the least
// weighted error (absolute error when use_mad). Returns the scale; *the_min receives min >= 0.
float search_affine_scale(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                          float* the_min, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  auto error_of = [&](float scale, float offset, const uint8_t* levels) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * float(levels[i]) + offset - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      err += weights[i] * diff;
    }
    return err;
  };
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) L[i] = uint8_t(clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  float best_error = error_of(scale, min, L);
  uint8_t Laux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float cur_error = error_of(this_scale, this_min, Laux);
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Packs four 2-bit planes: byte l of each 32-byte chunk holds elements l, l+32, l+64, l+96.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                              (L[j + l + 96] << 6));
}

// Q4_K/Q5_K: quantizes the 8 group scales and mins to 6 bits, packs them into 12 bytes and sets
// d/dmin. The caller then re-derives the levels from these stored (rounded) values.
template <typename Block>
void store_scales_mins(const float* scales, const float* mins, Block& y) {
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {  // low nibbles in bytes 8..11, top 2 bits in the spare bits of bytes 0..7
      y.scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      y.scales[j - 4] |= uint8_t((ls >> 4) << 6);
      y.scales[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  y.d = f2h(max_scale / 63.f);
  y.dmin = f2h(max_min / 63.f);
}

// Q4_K/Q5_K: group scales and mins for the 8 groups of 32 of one super-block; weights favour
// large values (rms of the group + |x|).
void affine_groups_of_32(const float* x, int nmax, float rmin, int nstep, uint8_t* L,
                         float* scales, float* mins) {
  float weights[32];
  for (int j = 0; j < 8; ++j) {
    const float* xg = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xg[l]);
    scales[j] = search_affine_scale(32, nmax, xg, weights, L + 32 * j, &mins[j], rmin, 0.1f,
                                    nstep, false);
  }
}

// Q4_K/Q5_K: levels recomputed against the stored (6-bit, fp16) scales and mins.
template <typename Block>
void requantize_affine(const float* x, const Block& y, int nmax, uint8_t* L) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(j, y.scales, sc, m);
    const float d = h2f(y.d) * float(sc);
    if (d == 0.0f) continue;
    const float dm = h2f(y.dmin) * float(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = uint8_t(clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

}  // namespace

// ---------------------------------------------------------------- dequantize

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(x[i].d), min = h2f(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {  // elements l and 16 + l of byte chunk q
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * float(sc & 0xF), ml = min * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = h2f(x[i].d);
    int8_t scales[16];
    q3k_scales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * float(scales[is++] - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            *y++ = dl * float(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(x[i].d), min = h2f(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      k4_scale_min(is, x[i].scales, sc, m);
      const float d1 = d * float(sc), m1 = min * float(m);
      k4_scale_min(is + 1, x[i].scales, sc, m);
      const float d2 = d * float(sc), m2 = min * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(x[i].d), min = h2f(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32) {
      uint8_t sc, m;
      k4_scale_min(is, x[i].scales, sc, m);
      const float d1 = d * float(sc), m1 = min * float(m);
      k4_scale_min(is + 1, x[i].scales, sc, m);
      const float d2 = d * float(sc), m2 = min * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = uint8_t(u1 << 2);
      u2 = uint8_t(u2 << 2);
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQK_K; ++j) *y++ = x[i].d * float(x[i].qs[j]);
}

// ---------------------------------------------------------------- quantize

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  constexpr float kQ4Scale = 15.f;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = search_affine_scale(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f,
                                      0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) y[i].scales[j] = uint8_t(nearest_int(iscale * scales[j]));
      y[i].d = f2h(max_scale / kQ4Scale);
    } else {
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      y[i].d = f2h(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] = uint8_t(y[i].scales[j] | (nearest_int(iscale * mins[j]) << 4));
      y[i].dmin = f2h(max_min / kQ4Scale);
    } else {
      y[i].dmin = f2h(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(y[i].d) * float(y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = h2f(y[i].dmin) * float(y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = uint8_t(clamp(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = search_q3_scale(16, 4, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = clamp(int8_t(nearest_int(iscale * scales[j])), -32, 31) + 32;
        if (j < 8) y[i].scales[j] = uint8_t(l & 0xF);
        else y[i].scales[j - 8] = uint8_t(y[i].scales[j - 8] | ((l & 0xF) << 4));
        y[i].scales[j % 4 + 8] = uint8_t(y[i].scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
      }
      y[i].d = f2h(1 / iscale);
    } else {
      y[i].d = f2h(0.f);
    }
    int8_t stored[16];
    q3k_scales(y[i].scales, stored);
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(y[i].d) * float(stored[j] - 32);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = int8_t(clamp(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
    }
    // Bit 2 of element j goes to bit j / 32 of hmask[j % 32]; the low 2 bits are packed as Q2_K.
    std::memset(y[i].hmask, 0, sizeof y[i].hmask);
    uint8_t low[kQK_K];
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) y[i].hmask[j % 32] = uint8_t(y[i].hmask[j % 32] | (1 << (j / 32)));
      low[j] = uint8_t(L[j] & 3);
    }
    pack_2bit(low, y[i].qs);
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[8], mins[8];
    affine_groups_of_32(x, 15, -1.f, 20, L, scales, mins);
    store_scales_mins(scales, mins, y[i]);
    requantize_affine(x, y[i], 15, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[8], mins[8];
    affine_groups_of_32(x, 31, -0.5f, 15, L, scales, mins);
    store_scales_mins(scales, mins, y[i]);
    requantize_affine(x, y[i], 31, L);
    // Low nibbles as Q4_K; bit 4 of element n + j (n = 64 * k) goes to bit 2k of qh[j], of
    // element n + 32 + j to bit 2k + 1.
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    uint8_t* ql = y[i].qs;
    for (int n = 0, k = 0; n < kQK_K; n += 64, ++k, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        const int l1 = L[n + j], l2 = L[n + j + 32];
        y[i].qh[j] = uint8_t(y[i].qh[j] | ((l1 >> 4) << (2 * k)) | ((l2 >> 4) << (2 * k + 1)));
        ql[j] = uint8_t((l1 & 0xF) | ((l2 & 0xF) << 4));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = search_symmetric_scale(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f2h(1 / iscale);
    for (int ib = 0; ib < 16; ++ib)
      y[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(y[i].d) * float(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = int8_t(clamp(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    // Each 128-element half: low nibbles of (l, l+64) share ql[l], of (l+32, l+96) ql[l+32];
    // the 2 high bits of l, l+32, l+64, l+96 share qh[l].
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float max = largest_magnitude(x, kQK_K);
    if (max == 0.0f) {
      // ggml leaves bsums untouched here; zero is their true value and keeps output deterministic.
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // -127 rather than -128 keeps every level symmetric (ggml: needed by IQ2_XXS's AVX code).
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
      y[i].bsums[j] = int16_t(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace jitllm::quant_ref
