// Vectorized (AVX2 + F16C + FMA) causal attention over paged K/V: the same arithmetic as
// reference_attention.cpp, element for element, so the results are bit-identical to it:
//  - one_chunk path (decode, < 64 rows): K.Q in ggml's vec-dot order (4 x 16 lanes, pairwise
//    reductions) as two ymm per 16 lanes; F16 V accumulator rounded with F16C (round to nearest
//    even, what the reference's f32_to_fp16 does).
//  - tiled path (prefill): each score is one sequential FMA chain over the head dimension; eight
//    keys run in the eight lanes of a ymm (keys transposed once per tile), so the chains are
//    independent and the per-key order is unchanged. V accumulation is element-wise FMA.
// Heads whose size is not a multiple of 64 go to the reference.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "core/fp16.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

constexpr int64_t kKvTile = 64;

inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

// dot_vec_order of reference_kernels.cpp for n % 64 == 0.
template <typename TA, typename TB>
float dot_vec(const TA* a, const TB* b, int n) {
  __m256 acc[4][2];
  for (auto& j : acc) j[0] = j[1] = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const int e = i + 16 * j + 8 * h;
        acc[j][h] = _mm256_fmadd_ps(load8(a + e), load8(b + e), acc[j][h]);
      }
  for (int h = 0; h < 2; ++h) {
    acc[0][h] = _mm256_add_ps(acc[0][h], acc[2][h]);
    acc[1][h] = _mm256_add_ps(acc[1][h], acc[3][h]);
    acc[0][h] = _mm256_add_ps(acc[0][h], acc[1][h]);
  }
  const __m256 l8 = _mm256_add_ps(acc[0][0], acc[0][1]);  // lanes i += i + 8
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(l8), _mm256_extractf128_ps(l8, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

inline __m128i to_half(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }

void attend_one_chunk(const AttentionArgs& a, int64_t r, int h, uint16_t* q16, uint16_t* acc16,
                      float* acc32) {
  const int hd = a.head_dim;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const float* q = a.q + (r * a.n_head + h) * hd;
  const bool f16 = a.kv_type == QuantType::F16;
  const size_t head_off = size_t(kvh) * hd * (f16 ? 2 : 4);
  const PagedRows& K = a.k[r];
  const PagedRows& V = a.v[r];
  if (f16) {
    for (int d = 0; d < hd; d += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q16 + d), to_half(_mm256_loadu_ps(q + d)));
    std::memset(acc16, 0, size_t(hd) * 2);
  } else {
    std::memset(acc32, 0, size_t(hd) * 4);
  }
  float S = 0.0f, M = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < a.n_kv[r]; ++j) {
    const uint8_t* krow = K.row(j) + head_off;
    const uint8_t* vrow = V.row(j) + head_off;
    float s = f16 ? dot_vec(reinterpret_cast<const uint16_t*>(krow), q16, hd)
                  : dot_vec(reinterpret_cast<const float*>(krow), q, hd);
    s = s * a.scale;
    const float m_old = M;
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
      M = s;
      ms = std::exp(m_old - M);
    } else {
      vs = std::exp(s - M);
    }
    const __m256 vms = _mm256_set1_ps(ms), vvs = _mm256_set1_ps(vs);
    if (f16) {
      const auto* v = reinterpret_cast<const uint16_t*>(vrow);
      for (int d = 0; d < hd; d += 8) {
        __m256 y = load8(acc16 + d);
        if (ms != 1.0f) y = _mm256_cvtph_ps(to_half(_mm256_mul_ps(y, vms)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(acc16 + d),
                         to_half(_mm256_fmadd_ps(load8(v + d), vvs, y)));
      }
    } else {
      const auto* v = reinterpret_cast<const float*>(vrow);
      for (int d = 0; d < hd; d += 8) {
        __m256 y = _mm256_loadu_ps(acc32 + d);
        if (ms != 1.0f) y = _mm256_mul_ps(y, vms);
        _mm256_storeu_ps(acc32 + d, _mm256_fmadd_ps(_mm256_loadu_ps(v + d), vvs, y));
      }
    }
    S = S * ms + vs;
  }
  const float s_inv = S == 0.0f ? 0.0f : 1.0f / S;
  float* out = a.out + (r * a.n_head + h) * hd;
  const __m256 vi = _mm256_set1_ps(s_inv);
  for (int d = 0; d < hd; d += 8)
    _mm256_storeu_ps(out + d, _mm256_mul_ps(f16 ? load8(acc16 + d) : _mm256_loadu_ps(acc32 + d), vi));
}

// All query heads of KV head `kvh` for row r (they read the same keys, so each tile of keys is
// transposed once for the group). kt: [head_dim][64] keys of the tile as floats; acc32, S, M per
// head of the group.
void attend_tiled_group(const AttentionArgs& a, int64_t r, int kvh, float* acc32_all,
                        float* scores, float* kt, float* krow_f) {
  const int hd = a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const bool f16 = a.kv_type == QuantType::F16;
  const size_t head_off = size_t(kvh) * hd * (f16 ? 2 : 4);
  const PagedRows& K = a.k[r];
  const PagedRows& V = a.v[r];
  const int64_t n_kv = a.n_kv[r];
  std::memset(acc32_all, 0, size_t(hd) * size_t(group) * 4);
  float S[64], M[64];
  for (int g = 0; g < group; ++g) {
    S[g] = 0.0f;
    M[g] = -std::numeric_limits<float>::infinity();
  }
  for (int64_t j0 = 0; j0 < n_kv; j0 += kKvTile) {
    const int64_t tile = std::min(kKvTile, n_kv - j0);
    const int groups = int((tile + 7) / 8);
    for (int64_t t = 0; t < groups * 8; ++t) {
      if (t < tile) {
        const uint8_t* kr = K.row(j0 + t) + head_off;
        for (int d = 0; d < hd; d += 8)
          _mm256_storeu_ps(krow_f + d, f16 ? load8(reinterpret_cast<const uint16_t*>(kr) + d)
                                           : load8(reinterpret_cast<const float*>(kr) + d));
        for (int d = 0; d < hd; ++d) kt[d * kKvTile + t] = krow_f[d];
      } else {
        for (int d = 0; d < hd; ++d) kt[d * kKvTile + t] = 0.0f;
      }
    }
    for (int hg = 0; hg < group; ++hg) {
      const int h = kvh * group + hg;
      const float* q = a.q + (r * a.n_head + h) * hd;
      float* acc32 = acc32_all + size_t(hg) * size_t(hd);
      // One FMA chain per key over d = 0..hd-1 (the reference's order), eight keys per ymm.
      __m256 acc[8];
      for (int g = 0; g < groups; ++g) acc[g] = _mm256_setzero_ps();
      for (int d = 0; d < hd; ++d) {
        const __m256 qd = _mm256_set1_ps(q[d]);
        const float* kd = kt + d * kKvTile;
        for (int g = 0; g < groups; ++g) acc[g] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kd + 8 * g), acc[g]);
      }
      const __m256 vsc = _mm256_set1_ps(a.scale);
      for (int g = 0; g < groups; ++g) _mm256_storeu_ps(scores + 8 * g, _mm256_mul_ps(acc[g], vsc));
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < tile; ++t) tile_max = std::max(tile_max, scores[t]);
      const float m_new = std::max(M[hg], tile_max);
      if (m_new > M[hg]) {
        const float msf = std::exp(M[hg] - m_new);
        const __m256 ms = _mm256_set1_ps(msf);
        for (int d = 0; d < hd; d += 8)
          _mm256_storeu_ps(acc32 + d, _mm256_mul_ps(_mm256_loadu_ps(acc32 + d), ms));
        S[hg] *= msf;
      }
      M[hg] = m_new;
      double sum = 0.0;
      for (int64_t t0 = 0; t0 < tile; t0 += 16) {
        float lanes[16] = {};
        for (int64_t t = t0; t < std::min(tile, t0 + 16); ++t) {
          scores[t] = ggml_vec_expf(scores[t] - M[hg]);
          lanes[t - t0] = scores[t];
        }
        for (int width = 8; width > 0; width /= 2)
          for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
        sum += double(lanes[0]);
      }
      S[hg] = float(double(S[hg]) + sum);
      for (int64_t t = 0; t < tile; ++t) {
        const uint8_t* vr = V.row(j0 + t) + head_off;
        const __m256 p = _mm256_set1_ps(scores[t]);
        for (int d = 0; d < hd; d += 8) {
          const __m256 v = f16 ? load8(reinterpret_cast<const uint16_t*>(vr) + d)
                               : load8(reinterpret_cast<const float*>(vr) + d);
          _mm256_storeu_ps(acc32 + d, _mm256_fmadd_ps(p, v, _mm256_loadu_ps(acc32 + d)));
        }
      }
    }
  }
  for (int hg = 0; hg < group; ++hg) {
    const int h = kvh * group + hg;
    const float s_inv = S[hg] == 0.0f ? 0.0f : 1.0f / S[hg];
    float* out = a.out + (r * a.n_head + h) * hd;
    const float* acc32 = acc32_all + size_t(hg) * size_t(hd);
    const __m256 vi = _mm256_set1_ps(s_inv);
    for (int d = 0; d < hd; d += 8)
      _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc32 + d), vi));
  }
}

}  // namespace

void JitKernels::attention(const AttentionArgs& a) const {
  if (a.head_dim <= 0 || a.head_dim % 64 != 0 || a.n_head <= 0 || a.n_head_kv <= 0 ||
      a.n_head % a.n_head_kv != 0 ||
      (a.kv_type != QuantType::F16 && a.kv_type != QuantType::F32))
    return ref_.attention(a);  // the reference validates and names what is wrong
  const int group = a.n_head / a.n_head_kv;
  if (a.f32_tiles && group <= 64) {
    // Tiled path: (row, KV head) pairs, each transposing its key tiles once for its query heads.
    const int64_t pairs = a.n_rows * a.n_head_kv;
    ThreadPool::global().parallel_for(pairs, 1, [&](int64_t p0, int64_t p1) {
      const size_t hd = size_t(a.head_dim);
      std::vector<float> acc32(hd * size_t(group)), scores(kKvTile), kt(hd * kKvTile), krow(hd);
      for (int64_t p = p0; p < p1; ++p)
        attend_tiled_group(a, p / a.n_head_kv, int(p % a.n_head_kv), acc32.data(), scores.data(),
                           kt.data(), krow.data());
    });
    return;
  }
  if (a.f32_tiles) return ref_.attention(a);
  const int64_t pairs = a.n_rows * a.n_head;
  ThreadPool::global().parallel_for(pairs, 1, [&](int64_t p0, int64_t p1) {
    const size_t hd = size_t(a.head_dim);
    std::vector<uint16_t> q16(hd), acc16(hd);
    std::vector<float> acc32(hd);
    for (int64_t p = p0; p < p1; ++p)
      attend_one_chunk(a, p / a.n_head, int(p % a.n_head), q16.data(), acc16.data(), acc32.data());
  });
}

}  // namespace jitllm
