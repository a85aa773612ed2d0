// Vectorized (AVX2 + F16C + FMA) causal attention over paged K/V: the same arithmetic as
// reference_attention.cpp, element for element, so the results are bit-identical to it:
//  - one_chunk path (decode, < 64 rows): K.Q in ggml's vec-dot order (4 x 16 lanes, pairwise
//    reductions) as two ymm per 16 lanes; F16 V accumulator rounded with F16C (round to nearest
//    even, what the reference's f32_to_fp16 does). Split over (row, KV head) on the pool: the
//    query heads of a GQA group run together, reading each K/V row once (prefetched ahead).
//  - tiled path (prefill): blocks of up to 16 consecutive query rows of one sequence x one KV
//    head; each 64-key tile is transposed (8x8 blocks) and its values converted once for the
//    block's rows and the GQA group's heads. Per (row, head): each score is one sequential FMA
//    chain over the head dimension (eight keys in the eight lanes of a ymm), tile max and
//    ggml's expf vectorized with the reference's semantics, the per-16 pairwise sums, and V
//    accumulated key after key in registers.
// Both honour a sliding window (keys before AttentionArgs::kv_start skipped, tiles still aligned
// to key 0) and soft-capped scores. Heads whose size is not a multiple of 64 go to the reference.
// V heads of their own width (MLA's latent: K 576, V its first 512, read from the K rows) run on
// both paths when that width is a multiple of 64.
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

// Scratch of one thread for attend_one_chunk_group.
struct ChunkScratch {
  std::vector<float> qf;        // [group][hd]: queries (F16-rounded when K is F16) as floats
  std::vector<uint16_t> acc16;  // [group][hv]: F16 V accumulators (V in F16)
  std::vector<float> acc32;     // [group][hv]: f32 V accumulators (V in F32)
  ChunkScratch(int hd, int hv, int group)
      : qf(size_t(hd) * size_t(group)), acc16(size_t(hv) * size_t(group)), acc32(acc16.size()) {}
};

// How many keys ahead the K/V rows are prefetched: rows are 1 KiB apart in the cache (all KV
// heads of a position), too far apart for the hardware prefetcher to follow across pages.
constexpr int64_t kPrefetchKeys = 8;

// Query heads hg0..hg1-1 of KV head `kvh`'s group for row r, ggml's one_chunk arithmetic per head (the
// reference's attend_one_chunk): each key and value row is read once for the group (at long
// contexts the cache does not fit L2, so one pass instead of one per head), and the heads'
// online-softmax chains, which are independent, overlap in the out-of-order core. A query
// rounded to F16 and converted back is exact, so dots on those floats give the same bits.
void attend_one_chunk_group(const AttentionArgs& a, int64_t r, int kvh, int hg0, int hg1,
                            ChunkScratch& sc) {
  const int hd = a.head_dim, hv = a.head_dim_v > 0 ? a.head_dim_v : a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const bool f16 = a.kv_type == QuantType::F16;
  const size_t row_bytes = size_t(hd) * (f16 ? 2 : 4), v_bytes = size_t(hv) * (f16 ? 2 : 4);
  const size_t head_off = size_t(kvh) * row_bytes;
  const size_t v_head_off = a.v_in_k ? head_off : size_t(kvh) * v_bytes;
  const PagedRows& K = a.k[r];
  const PagedRows& V = a.v[r];
  const int64_t n_kv = a.n_kv[r];
  for (int hg = hg0; hg < hg1; ++hg) {
    const float* q = a.q + (r * a.n_head + kvh * group + hg) * hd;
    float* qf = sc.qf.data() + size_t(hg) * hd;
    for (int d = 0; d < hd; d += 8) {
      const __m256 x = _mm256_loadu_ps(q + d);
      _mm256_storeu_ps(qf + d, f16 ? _mm256_cvtph_ps(to_half(x)) : x);
    }
  }
  if (f16)
    std::memset(sc.acc16.data(), 0, sc.acc16.size() * 2);
  else
    std::memset(sc.acc32.data(), 0, sc.acc32.size() * 4);
  float S[64], M[64];  // [group]
  for (int hg = hg0; hg < hg1; ++hg) {
    S[hg] = 0.0f;
    M[hg] = -std::numeric_limits<float>::infinity();
  }
  for (int64_t j = a.kv_start ? a.kv_start[r] : 0; j < n_kv; ++j) {
    if (j + kPrefetchKeys < n_kv) {
      const uint8_t* kp = K.row(j + kPrefetchKeys) + head_off;
      const uint8_t* vp = V.row(j + kPrefetchKeys) + v_head_off;
      for (size_t o = 0; o < row_bytes; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(kp + o), _MM_HINT_T0);
      if (!a.v_in_k)  // else the K row's prefetch brought it
        for (size_t o = 0; o < v_bytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(vp + o), _MM_HINT_T0);
    }
    const uint8_t* krow = K.row(j) + head_off;
    const uint8_t* vrow = V.row(j) + v_head_off;
    for (int hg = hg0; hg < hg1; ++hg) {
      const float* qf = sc.qf.data() + size_t(hg) * hd;
      const float s = soft_capped((f16 ? dot_vec(reinterpret_cast<const uint16_t*>(krow), qf, hd)
                                       : dot_vec(reinterpret_cast<const float*>(krow), qf, hd)) *
                                      a.scale,
                                  a.softcap);
      const float m_old = M[hg];
      float ms = 1.0f, vs = 1.0f;
      if (s > m_old) {
        M[hg] = s;
        ms = std::exp(m_old - s);
      } else {
        vs = std::exp(s - m_old);
      }
      const __m256 vms = _mm256_set1_ps(ms), vvs = _mm256_set1_ps(vs);
      if (f16) {
        const auto* v = reinterpret_cast<const uint16_t*>(vrow);
        uint16_t* acc = sc.acc16.data() + size_t(hg) * hv;
        for (int d = 0; d < hv; d += 8) {
          __m256 y = load8(acc + d);
          if (ms != 1.0f) y = _mm256_cvtph_ps(to_half(_mm256_mul_ps(y, vms)));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + d),
                           to_half(_mm256_fmadd_ps(load8(v + d), vvs, y)));
        }
      } else {
        const auto* v = reinterpret_cast<const float*>(vrow);
        float* acc = sc.acc32.data() + size_t(hg) * hv;
        for (int d = 0; d < hv; d += 8) {
          __m256 y = _mm256_loadu_ps(acc + d);
          if (ms != 1.0f) y = _mm256_mul_ps(y, vms);
          _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(_mm256_loadu_ps(v + d), vvs, y));
        }
      }
      S[hg] = S[hg] * ms + vs;
    }
  }
  for (int hg = hg0; hg < hg1; ++hg) {
    const float sink_ms = a.sinks ? apply_sink(a.sinks[kvh * group + hg], M[hg], S[hg]) : 1.0f;
    const float s_inv = S[hg] == 0.0f ? 0.0f : 1.0f / S[hg];
    float* out = a.out + (r * a.n_head + kvh * group + hg) * hv;
    const __m256 vi = _mm256_set1_ps(s_inv), vms = _mm256_set1_ps(sink_ms);
    for (int d = 0; d < hv; d += 8) {
      __m256 acc = f16 ? load8(sc.acc16.data() + size_t(hg) * hv + d)
                       : _mm256_loadu_ps(sc.acc32.data() + size_t(hg) * hv + d);
      if (sink_ms != 1.0f) acc = _mm256_mul_ps(acc, vms);
      _mm256_storeu_ps(out + d, _mm256_mul_ps(acc, vi));
    }
  }
}

// ggml_vec_expf (reference_kernels.cpp) for 8 lanes with the same operations, so the same bits:
// the shifter rounding, the two-part reduction, the degree-5 polynomial, then j * 2^n rounded
// once as ldexp does: one exact product for n in [-125, 127]; (j * 2^(n+100)) * 2^-100 below
// (exact, then one rounding into the subnormals); (j * 2^127) * 2^(n-127) above; |n| > 192
// saturates to 0 / inf. NaN lanes are the caller's business.
__m256 ggml_expf8(__m256 x) {
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter);
  const __m256 n = _mm256_sub_ps(z, shifter);
  const __m256 nn = _mm256_xor_ps(n, _mm256_set1_ps(-0.0f));  // -n, exactly
  const __m256 b = _mm256_fmadd_ps(nn, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                   _mm256_fmadd_ps(nn, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  auto pow2 = [](__m256 k) {  // 2^k for integral k in [-126, 127]
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
  };
  // Common case (softmax: x in (-86, 0]): every lane's n in [-125, 127], one exact product.
  const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_set1_ps(-125.0f), _CMP_GE_OQ),
                                        _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_LE_OQ));
  if (_mm256_movemask_ps(in_range) == 0xFF) return _mm256_mul_ps(j, pow2(n));
  const __m256 low = _mm256_cmp_ps(n, _mm256_set1_ps(-125.0f), _CMP_LT_OQ);
  const __m256 high = _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_GT_OQ);
  const __m256 nc = _mm256_max_ps(_mm256_min_ps(n, _mm256_set1_ps(192.0f)), _mm256_set1_ps(-192.0f));
  __m256 e1 = _mm256_blendv_ps(nc, _mm256_add_ps(nc, _mm256_set1_ps(100.0f)), low);
  e1 = _mm256_blendv_ps(e1, _mm256_set1_ps(127.0f), high);
  __m256 e2 = _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_set1_ps(-100.0f), low);
  e2 = _mm256_blendv_ps(e2, _mm256_sub_ps(nc, _mm256_set1_ps(127.0f)), high);
  __m256 ex = _mm256_mul_ps(_mm256_mul_ps(j, pow2(e1)), pow2(e2));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 sat = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 sat_value = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                            _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
  return _mm256_blendv_ps(ex, sat_value, sat);
}

// 8x8 transpose of floats: r[i] lane j <-> r[j] lane i.
void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Scratch of one thread for attend_tiled_block (sized for head_dim, the GQA group and
// kMaxBlockRows query rows).
constexpr int64_t kMaxBlockRows = 16;
struct TiledScratch {
  std::vector<float> kt;      // [head_dim][64]: the key tile, transposed
  std::vector<float> vt;      // [64][hv]: the value tile as floats
  std::vector<float> acc;     // [rows][group][hv]: V accumulators
  std::vector<float> S, M;    // [rows][group]: softmax sums and running maxima
  std::vector<const float*> vrow;  // [64]: value rows (into vt, or the cache when F32)
  TiledScratch(int hd, int hv, int group)
      : kt(size_t(hd) * kKvTile), vt(size_t(hv) * kKvTile),
        acc(size_t(kMaxBlockRows) * size_t(group) * size_t(hv)),
        S(size_t(kMaxBlockRows) * size_t(group)), M(S.size()), vrow(kKvTile) {}
};

// Lanes l with lo <= l < hi, as an all-ones mask.
inline __m256 visible(__m256i lane, int lo, int hi) {
  const __m256i ge_lo = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1));
  const __m256i lt_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane);
  return _mm256_castsi256_ps(_mm256_and_si256(ge_lo, lt_hi));
}

// One query head's share of one 64-key tile (ggml's tiled arithmetic, as attend_tiled in
// reference_attention.cpp): scores as one FMA chain per key over d (eight keys per ymm), the tile
// maximum, the rescale, ggml's expf, the per-16 pairwise sum added in double, and V accumulated
// key after key. acc: [hv] (kept in registers 64 dims at a time).
void tile_one_head(const float* q, int hd, int hv, float scale, float cap, const float* kt,
                   const float* const* vrow, int64_t first, int64_t tile, float* acc, float& S,
                   float& M) {
  alignas(32) float scores[kKvTile];
  const int groups = int((tile + 7) / 8);
  // All 64 keys of the tile, whatever `tile` is: a constant count keeps the eight accumulators
  // in registers (a variable one spilled them to the stack); keys past the tile are ignored.
  __m256 sacc[8];
  for (int g = 0; g < 8; ++g) sacc[g] = _mm256_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    const __m256 qd = _mm256_set1_ps(q[d]);
    const float* kd = kt + d * kKvTile;
    for (int g = 0; g < 8; ++g) sacc[g] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kd + 8 * g), sacc[g]);
  }
  const __m256 vsc = _mm256_set1_ps(scale);
  for (int g = 0; g < 8; ++g) _mm256_store_ps(scores + 8 * g, _mm256_mul_ps(sacc[g], vsc));
  if (cap > 0.0f)
    for (int64_t t = first; t < tile; ++t) scores[t] = soft_capped(scores[t], cap);
  // Tile maximum over first <= t < tile. vmaxps(score, m) returns m when the score is NaN, which is what
  // the reference's std::max(m, score) does; lanes past the tile read as -inf.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  for (int g = 0; g < groups; ++g) {
    const __m256 in_tile = visible(lane, int(first - 8 * g), int(tile - 8 * g));
    vmax = _mm256_max_ps(_mm256_blendv_ps(neg_inf, _mm256_load_ps(scores + 8 * g), in_tile), vmax);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float tile_max = _mm_cvtss_f32(m4);
  const float m_new = std::max(M, tile_max);
  if (m_new > M) {
    const float msf = std::exp(M - m_new);
    const __m256 ms = _mm256_set1_ps(msf);
    for (int d = 0; d < hv; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), ms));
    S *= msf;
  }
  M = m_new;
  // exp(score - M), lanes past the tile zeroed (the reference's per-16 sums see zeros there).
  const __m256 vm = _mm256_set1_ps(M);
  for (int g = 0; g < groups; ++g) {
    const __m256 x = _mm256_sub_ps(_mm256_load_ps(scores + 8 * g), vm);
    __m256 e;
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, x);
      for (float& v : tmp) v = ggml_vec_expf(v);
      e = _mm256_load_ps(tmp);
    } else {
      e = ggml_expf8(x);
    }
    if (8 * g < first || 8 * g + 8 > tile)
      e = _mm256_and_ps(e, visible(lane, int(first - 8 * g), int(tile - 8 * g)));
    _mm256_store_ps(scores + 8 * g, e);
  }
  double sum = 0.0;
  for (int g = 0; g < groups; g += 2) {
    // lanes[i] += lanes[i + 8], then + 4, + 2, + 1: the reference's pairwise tree over 16.
    __m256 l8 = _mm256_load_ps(scores + 8 * g);
    if (g + 1 < groups) l8 = _mm256_add_ps(l8, _mm256_load_ps(scores + 8 * g + 8));
    __m128 x4 = _mm_add_ps(_mm256_castps256_ps128(l8), _mm256_extractf128_ps(l8, 1));
    x4 = _mm_add_ps(x4, _mm_movehl_ps(x4, x4));
    x4 = _mm_add_ss(x4, _mm_movehdup_ps(x4));
    sum += double(_mm_cvtss_f32(x4));
  }
  S = float(double(S) + sum);
  for (int d0 = 0; d0 < hv; d0 += 64) {  // 64 dims = 8 ymm accumulators in registers
    __m256 va[8];
    for (int c = 0; c < 8; ++c) va[c] = _mm256_loadu_ps(acc + d0 + 8 * c);
    for (int64_t t = 0; t < tile; ++t) {
      const __m256 p = _mm256_set1_ps(scores[t]);
      const float* v = vrow[t] + d0;
      for (int c = 0; c < 8; ++c) va[c] = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 8 * c), va[c]);
    }
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(acc + d0 + 8 * c, va[c]);
  }
}

// Query rows [r0, r1) -- consecutive rows of one sequence (same K/V view) -- against KV head
// `kvh`, for all query heads of its GQA group: each 64-key tile is transposed (and each value
// tile converted) once for all of them, then every (row, head) runs tile_one_head on it. The
// per-(row, head) arithmetic is the reference's; only the sharing of tiles is new.
void attend_tiled_block(const AttentionArgs& a, int64_t r0, int64_t r1, int kvh, TiledScratch& s) {
  const int hd = a.head_dim, hv = a.head_dim_v > 0 ? a.head_dim_v : a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const bool f16 = a.kv_type == QuantType::F16;
  const size_t head_off = size_t(kvh) * hd * (f16 ? 2 : 4);
  const size_t v_head_off = a.v_in_k ? head_off : size_t(kvh) * hv * (f16 ? 2 : 4);
  const PagedRows& K = a.k[r0];
  const PagedRows& V = a.v[r0];
  const int64_t rows = r1 - r0;
  int64_t max_kv = 0;
  for (int64_t r = r0; r < r1; ++r) max_kv = std::max(max_kv, a.n_kv[r]);
  std::fill(s.acc.begin(), s.acc.begin() + rows * group * hv, 0.0f);
  std::fill(s.S.begin(), s.S.begin() + rows * group, 0.0f);
  std::fill(s.M.begin(), s.M.begin() + rows * group, -std::numeric_limits<float>::infinity());
  int64_t min_start = max_kv;  // the block's earliest visible key (sliding windows)
  for (int64_t r = r0; r < r1; ++r) min_start = std::min(min_start, a.kv_start ? a.kv_start[r] : 0);
  for (int64_t j0 = min_start / kKvTile * kKvTile; j0 < max_kv; j0 += kKvTile) {
    const int64_t len = std::min(kKvTile, max_kv - j0);
    // Keys -> kt[d][t] by 8x8 blocks; keys past `len` are zeros.
    for (int64_t t0 = 0; t0 < (len + 7) / 8 * 8; t0 += 8) {
      const uint8_t* kr[8];
      for (int i = 0; i < 8; ++i) kr[i] = t0 + i < len ? K.row(j0 + t0 + i) + head_off : nullptr;
      for (int d = 0; d < hd; d += 8) {
        __m256 blk[8];
        for (int i = 0; i < 8; ++i)
          blk[i] = !kr[i] ? _mm256_setzero_ps()
                   : f16  ? load8(reinterpret_cast<const uint16_t*>(kr[i]) + d)
                          : load8(reinterpret_cast<const float*>(kr[i]) + d);
        transpose8(blk);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(s.kt.data() + (d + i) * kKvTile + t0, blk[i]);
      }
    }
    for (int64_t t = 0; t < len; ++t) {
      const uint8_t* vr = V.row(j0 + t) + v_head_off;
      if (f16) {
        float* dst = s.vt.data() + t * hv;
        for (int d = 0; d < hv; d += 8)
          _mm256_storeu_ps(dst + d, load8(reinterpret_cast<const uint16_t*>(vr) + d));
        s.vrow[size_t(t)] = dst;
      } else {
        s.vrow[size_t(t)] = reinterpret_cast<const float*>(vr);
      }
    }
    for (int64_t r = r0; r < r1; ++r) {
      if (a.n_kv[r] <= j0) continue;
      const int64_t tile = std::min(kKvTile, a.n_kv[r] - j0);
      const int64_t first = std::max<int64_t>(0, (a.kv_start ? a.kv_start[r] : 0) - j0);
      if (first >= tile) continue;  // the whole tile is before the row's window
      for (int hg = 0; hg < group; ++hg) {
        const size_t st = size_t((r - r0) * group + hg);
        const float* q = a.q + (r * a.n_head + kvh * group + hg) * hd;
        tile_one_head(q, hd, hv, a.scale, a.softcap, s.kt.data(), s.vrow.data(), first, tile,
                      s.acc.data() + st * hv, s.S[st], s.M[st]);
      }
    }
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int hg = 0; hg < group; ++hg) {
      const size_t st = size_t((r - r0) * group + hg);
      const float sink_ms = a.sinks ? apply_sink(a.sinks[kvh * group + hg], s.M[st], s.S[st]) : 1.0f;
      const float s_inv = s.S[st] == 0.0f ? 0.0f : 1.0f / s.S[st];
      float* out = a.out + (r * a.n_head + kvh * group + hg) * hv;
      const float* acc = s.acc.data() + st * hv;
      const __m256 vi = _mm256_set1_ps(s_inv), vms = _mm256_set1_ps(sink_ms);
      for (int d = 0; d < hv; d += 8) {
        __m256 y = _mm256_loadu_ps(acc + d);
        if (sink_ms != 1.0f) y = _mm256_mul_ps(y, vms);
        _mm256_storeu_ps(out + d, _mm256_mul_ps(y, vi));
      }
    }
}

bool same_view(const PagedRows& x, const PagedRows& y) {
  return x.pages == y.pages && x.rows_per_page == y.rows_per_page &&
         x.page_offset == y.page_offset && x.row_stride == y.row_stride;
}

}  // namespace

void JitKernels::attention(const AttentionArgs& a) const {
  // V heads of another width than K's (MLA's latent, 512 of 576): both paths take a multiple of
  // 64 (the tiled path accumulates V 64 dims at a time), anything else runs on the reference.
  if (a.head_dim_v > 0 && a.head_dim_v % 64 != 0) return ref_.attention(a);
  if (a.head_dim <= 0 || a.head_dim % 64 != 0 || a.n_head <= 0 || a.n_head_kv <= 0 ||
      a.n_head % a.n_head_kv != 0 ||
      (a.kv_type != QuantType::F16 && a.kv_type != QuantType::F32))
    return ref_.attention(a);  // the reference validates and names what is wrong
  const int group = a.n_head / a.n_head_kv;
  if (a.f32_tiles) {
    // Tiled path: blocks of up to kMaxBlockRows consecutive rows of one sequence, times KV heads;
    // each block shares its key/value tiles among its rows and the heads of the GQA group.
    std::vector<int64_t> starts;  // block b = rows [starts[b], starts[b + 1])
    for (int64_t r = 0; r < a.n_rows; ++r)
      if (r == 0 || r - starts.back() == kMaxBlockRows || !same_view(a.k[r], a.k[r - 1]) ||
          !same_view(a.v[r], a.v[r - 1]))
        starts.push_back(r);
    starts.push_back(a.n_rows);
    const int64_t n_blocks = int64_t(starts.size()) - 1;
    ThreadPool::global().parallel_for(n_blocks * a.n_head_kv, 1, [&](int64_t p0, int64_t p1) {
      TiledScratch scratch(a.head_dim, a.head_dim_v > 0 ? a.head_dim_v : a.head_dim, group);
      for (int64_t p = p0; p < p1; ++p) {
        // Last blocks first: in a causal prefill they attend the most keys, and handing out the
        // longest work first leaves the shortest pieces to balance the threads at the end.
        const int64_t b = n_blocks - 1 - p / a.n_head_kv;
        attend_tiled_block(a, starts[size_t(b)], starts[size_t(b) + 1], int(p % a.n_head_kv), scratch);
      }
    });
    return;
  }
  if (group > 64) return ref_.attention(a);  // the per-head state arrays hold 64
  // One_chunk path: (row, KV head) pairs, each running the query heads of its group together;
  // when that gives fewer than two items per thread (one decode row, many threads), each group
  // is split into `parts` runs of heads (each still reading its K/V rows once).
  ThreadPool& pool = ThreadPool::global();
  const int64_t pairs = a.n_rows * a.n_head_kv;
  const int parts = int(std::clamp<int64_t>((2 * pool.size() + pairs - 1) / pairs, 1, group));
  pool.parallel_for(pairs * parts, 1, [&](int64_t p0, int64_t p1) {
    ChunkScratch scratch(a.head_dim, a.head_dim_v > 0 ? a.head_dim_v : a.head_dim, group);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t pair = p / parts;
      const int part = int(p % parts);
      attend_one_chunk_group(a, pair / a.n_head_kv, int(pair % a.n_head_kv), part * group / parts,
                             (part + 1) * group / parts, scratch);
    }
  });
}

}  // namespace jitllm
