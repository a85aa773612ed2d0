// JitKernels' RMSNorm and RoPE, vectorized (AVX2 + FMA) with the reference's arithmetic, so the
// results are bit-identical to reference_kernels.cpp:
//  - RMSNorm: ggml sums the squares of a row in double, one element after the other. That chain
//    cannot be reordered without changing bits, so rows run side by side instead: eight rows
//    share two ymm of doubles (lane = row), each lane still adding its row's squares in order.
//    The scaling pass, (x * scale) * w, is plain element-wise vector math.
//  - RoPE: the cos/sin table of each position comes from rope_cache (the reference's, repeated
//    float multiplication as ggml does). The reference's rotation compiles to
//    a = fma(x0, c, -(x1 * s)), b = fma(x0, s, x1 * c) (GCC contracts `x0*c - x1*s` and
//    `x0*s + x1*c` that way; the tests pin it), done here on interleaved pairs (normal mode)
//    or on the two halves (neox) with explicit FMAs.
// Rows (RMSNorm) and tokens (RoPE) are split over the pool for prefill-sized calls.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

constexpr int64_t kPoolMinElems = 65536;  // smaller calls run on the caller alone

// out[r] = x[r] * scale * w for one row (x and out may alias).
void scale_row(const float* x, const float* w, float scale, int64_t dim, float* out) {
  const __m256 vs = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
                                            _mm256_loadu_ps(w + i)));
  for (; i < dim; ++i) out[i] = x[i] * scale * w[i];
}

float rms_scale(double sum, int64_t dim, float eps) {
  const float mean = float(sum / double(dim));
  return 1.0f / std::sqrt(mean + eps);
}

// Squares of 8 rows summed in double, each row in element order (lane r of lo/hi = row r / r+4).
void sum_squares8(const float* const* rows, int64_t dim, double* sums) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    // [row][4 elements] squared in float (the reference rounds x*x to float first)...
    __m128 r[8];
    for (int k = 0; k < 8; ++k) {
      const __m128 v = _mm_loadu_ps(rows[k] + i);
      r[k] = _mm_mul_ps(v, v);
    }
    // ...transposed to [element][row], then added one element at a time.
    _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
    _MM_TRANSPOSE4_PS(r[4], r[5], r[6], r[7]);
    for (int e = 0; e < 4; ++e) {
      lo = _mm256_add_pd(lo, _mm256_cvtps_pd(r[e]));
      hi = _mm256_add_pd(hi, _mm256_cvtps_pd(r[4 + e]));
    }
  }
  _mm256_storeu_pd(sums, lo);
  _mm256_storeu_pd(sums + 4, hi);
  for (; i < dim; ++i)
    for (int k = 0; k < 8; ++k) sums[k] += double(rows[k][i] * rows[k][i]);
}

void rms_norm_rows(const float* x, const float* w, int64_t t0, int64_t t1, int64_t dim,
                   float eps, float* out) {
  int64_t t = t0;
  for (; t + 8 <= t1; t += 8) {
    const float* rows[8];
    for (int k = 0; k < 8; ++k) rows[k] = x + (t + k) * dim;
    double sums[8];
    sum_squares8(rows, dim, sums);
    for (int k = 0; k < 8; ++k)
      scale_row(rows[k], w, rms_scale(sums[k], dim, eps), dim, out + (t + k) * dim);
  }
  for (; t < t1; ++t) {  // fewer than 8 rows left (decode: one): a scalar chain each
    const float* xr = x + t * dim;  // [dim]
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += double(xr[i] * xr[i]);
    scale_row(xr, w, rms_scale(sum, dim, eps), dim, out + t * dim);
  }
}

}  // namespace

void JitKernels::rms_norm(const float* x, const float* w, int64_t n, int64_t dim, float eps,
                          float* out) const {
  if (n * dim < kPoolMinElems) return rms_norm_rows(x, w, 0, n, dim, eps, out);
  ThreadPool::global().parallel_for(n, 8, [&](int64_t t0, int64_t t1) {
    rms_norm_rows(x, w, t0, t1, dim, eps, out);
  });
}

namespace {

// Rotates the first n_rot dims of each of the n_heads heads of one token. cache: [n_rot] as
// rope_cache writes it (cos at 2i, sin at 2i+1); cs: [n_rot] scratch for neox.
void rope_token(float* x, int n_heads, int head_dim, const RopeParams& p, const float* cache,
                float* cs) {
  const int n_rot = p.n_rot;
  if (p.mode == RopeMode::Normal) {
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + int64_t(h) * head_dim;  // [head_dim]
      int i0 = 0;
      for (; i0 + 8 <= n_rot; i0 += 8) {
        const __m256 xv = _mm256_loadu_ps(v + i0);        // x0 x1 | x0 x1 ...
        const __m256 tab = _mm256_loadu_ps(cache + i0);   // c s | c s ...
        const __m256 c = _mm256_moveldup_ps(tab), s = _mm256_movehdup_ps(tab);
        const __m256 swapped = _mm256_permute_ps(xv, 0xB1);  // x1 x0 | x1 x0 ...
        // even lanes: fma(x0, c, -(x1*s)); odd lanes: fma(x0, s, x1*c)
        const __m256 even = _mm256_fmsub_ps(xv, c, _mm256_mul_ps(swapped, s));
        const __m256 odd = _mm256_fmadd_ps(swapped, s, _mm256_mul_ps(xv, c));
        _mm256_storeu_ps(v + i0, _mm256_blend_ps(even, odd, 0xAA));
      }
      for (; i0 < n_rot; i0 += 2) {
        const float c = cache[i0], s = cache[i0 + 1], x0 = v[i0], x1 = v[i0 + 1];
        v[i0] = std::fma(x0, c, -(x1 * s));
        v[i0 + 1] = std::fma(x0, s, x1 * c);
      }
    }
    return;
  }
  // Neox: pair i is (i, i + n_rot/2); cos and sin deinterleaved once for all heads.
  const int half = n_rot / 2;
  float* cosv = cs;         // [half]
  float* sinv = cs + half;  // [half]
  for (int i = 0; i < half; ++i) {
    cosv[i] = cache[2 * i];
    sinv[i] = cache[2 * i + 1];
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;  // [head_dim]
    int i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + half + i);
      const __m256 c = _mm256_loadu_ps(cosv + i), s = _mm256_loadu_ps(sinv + i);
      _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
    }
    for (; i < half; ++i) {
      const float c = cosv[i], s = sinv[i], x0 = v[i], x1 = v[half + i];
      v[i] = std::fma(x0, c, -(x1 * s));
      v[half + i] = std::fma(x0, s, x1 * c);
    }
  }
}

}  // namespace

void JitKernels::rope(float* x, int64_t n, int n_heads, int head_dim, const int32_t* pos,
                      const RopeParams& p) const {
  if (p.n_rot <= 0 || p.n_rot > head_dim || p.n_rot % 2 != 0)
    throw_error("rope: n_rot {} must be even and in (0, head_dim {}]", p.n_rot, head_dim);
  float corr[2] = {0, 0};
  if (p.ext_factor != 0.0f) yarn_corr_dims(p, corr);
  const int64_t token_elems = int64_t(n_heads) * head_dim;
  auto run = [&](int64_t t0, int64_t t1) {
    std::vector<float> cache(size_t(p.n_rot)), cs(size_t(p.n_rot));  // [n_rot] each
    for (int64_t t = t0; t < t1; ++t) {
      rope_cache(float(pos[t]), p, corr, cache.data());
      rope_token(x + t * token_elems, n_heads, head_dim, p, cache.data(), cs.data());
    }
  };
  if (n * token_elems < kPoolMinElems) return run(0, n);
  ThreadPool::global().parallel_for(n, 1, run);
}

}  // namespace jitllm
