// Reference causal attention over paged K/V (ragged batches: every query row has its own
// sequence and length; a sliding window starts it at kv_start; scores optionally soft-capped; V
// heads of their own width, MLA's latent read from the K rows). Reproduces the arithmetic of ggml-cpu's flash-attention kernels, which is
// what llama.cpp runs by default on CPU, so logits can be compared at the 1e-6 level:
//  - one_chunk path (AttentionArgs::f32_tiles == false): Q rounded to F16 when K is F16, one key
//    at a time with an online softmax in f32, and -- when V is F16 -- the V accumulator itself
//    kept in F16 (each update rounds to F16). ggml uses it for ubatches of fewer than 64 tokens,
//    so for every decode step.
//  - tiled path (f32_tiles == true): Q in f32, keys in tiles of 64, one max/rescale per tile,
//    softmax sum in double per tile, V accumulated in f32. ggml uses it for ubatches of >= 64.
// Threads split (row, head) pairs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

constexpr int64_t kKvTile = 64;  // ggml's GGML_FA_TILE_KV

// One query head of one row, ggml's one_chunk arithmetic.
void attend_one_chunk(const AttentionArgs& a, int64_t r, int h, std::vector<uint16_t>& q16,
                      std::vector<uint16_t>& acc16, std::vector<float>& acc32) {
  const int hd = a.head_dim, hv = a.head_dim_v > 0 ? a.head_dim_v : a.head_dim;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const float* q = a.q + (r * a.n_head + h) * hd;
  const bool f16 = a.kv_type == QuantType::F16;
  const size_t head_off = size_t(kvh) * hd * (f16 ? 2 : 4);
  const size_t v_head_off = size_t(kvh) * (a.v_in_k ? hd : hv) * (f16 ? 2 : 4);
  const PagedRows& K = a.k[r];
  const PagedRows& V = a.v[r];

  if (f16) {
    for (int d = 0; d < hd; ++d) q16[d] = f32_to_fp16(q[d]);
    std::fill(acc16.begin(), acc16.end(), uint16_t(0));
  } else {
    std::fill(acc32.begin(), acc32.end(), 0.0f);
  }
  float S = 0.0f, M = -std::numeric_limits<float>::infinity();
  for (int64_t j = a.kv_start ? a.kv_start[r] : 0; j < a.n_kv[r]; ++j) {
    const uint8_t* krow = K.row(j) + head_off;
    const uint8_t* vrow = V.row(j) + v_head_off;
    // ggml's kq_vec_dot is ggml_vec_dot_f16 / _f32: the vec summation order.
    float s = f16 ? dot_f16_f16_vec(reinterpret_cast<const uint16_t*>(krow), q16.data(), hd)
                  : dot_f32_vec(reinterpret_cast<const float*>(krow), q, hd);
    s = soft_capped(s * a.scale, a.softcap);
    const float m_old = M;
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
      M = s;
      ms = std::exp(m_old - M);
    } else {
      vs = std::exp(s - M);
    }
    if (f16) {
      const auto* v = reinterpret_cast<const uint16_t*>(vrow);
      for (int d = 0; d < hv; ++d) {
        float y = fp16_to_f32(acc16[d]);
        if (ms != 1.0f) y = fp16_to_f32(f32_to_fp16(y * ms));  // ggml_vec_scale_f16 rounds
        acc16[d] = f32_to_fp16(std::fma(fp16_to_f32(v[d]), vs, y));
      }
    } else {
      const auto* v = reinterpret_cast<const float*>(vrow);
      for (int d = 0; d < hv; ++d) {
        if (ms != 1.0f) acc32[d] *= ms;
        acc32[d] = std::fma(v[d], vs, acc32[d]);
      }
    }
    S = S * ms + vs;
  }
  // ggml widens the F16 accumulator to f32 before the sink's rescale.
  const float sink_ms = a.sinks ? apply_sink(a.sinks[h], M, S) : 1.0f;
  const float s_inv = S == 0.0f ? 0.0f : 1.0f / S;
  float* out = a.out + (r * a.n_head + h) * hv;
  for (int d = 0; d < hv; ++d) {
    float y = f16 ? fp16_to_f32(acc16[d]) : acc32[d];
    if (sink_ms != 1.0f) y *= sink_ms;
    out[d] = y * s_inv;
  }
}

// One query head of one row, ggml's tiled arithmetic.
void attend_tiled(const AttentionArgs& a, int64_t r, int h, std::vector<float>& acc32,
                  std::vector<float>& scores, std::vector<float>& kf) {
  const int hd = a.head_dim, hv = a.head_dim_v > 0 ? a.head_dim_v : a.head_dim;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const float* q = a.q + (r * a.n_head + h) * hd;
  const bool f16 = a.kv_type == QuantType::F16;
  const size_t head_off = size_t(kvh) * hd * (f16 ? 2 : 4);
  const size_t v_head_off = size_t(kvh) * (a.v_in_k ? hd : hv) * (f16 ? 2 : 4);
  const PagedRows& K = a.k[r];
  const PagedRows& V = a.v[r];
  const int64_t n_kv = a.n_kv[r];

  const int64_t start = a.kv_start ? a.kv_start[r] : 0;
  std::fill(acc32.begin(), acc32.end(), 0.0f);
  float S = 0.0f, M = -std::numeric_limits<float>::infinity();
  // Tiles stay aligned to key 0 (ggml's), keys before a sliding window's start masked out.
  for (int64_t j0 = start / kKvTile * kKvTile; j0 < n_kv; j0 += kKvTile) {
    const int64_t tile = std::min(kKvTile, n_kv - j0);
    const int64_t first = std::max<int64_t>(0, start - j0);  // the tile's first visible key
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t t = first; t < tile; ++t) {
      const uint8_t* krow = K.row(j0 + t) + head_off;
      if (f16) {
        const auto* k16 = reinterpret_cast<const uint16_t*>(krow);
        for (int d = 0; d < hd; ++d) kf[d] = fp16_to_f32(k16[d]);
      } else {
        std::memcpy(kf.data(), krow, size_t(hd) * sizeof(float));
      }
      // ggml's simd_gemm: one fused multiply-add chain over the head dimension.
      float s = 0.0f;
      for (int d = 0; d < hd; ++d) s = std::fma(q[d], kf[d], s);
      scores[t] = soft_capped(s * a.scale, a.softcap);
      tile_max = std::max(tile_max, scores[t]);
    }
    const float m_new = std::max(M, tile_max);
    if (m_new > M) {
      const float ms = std::exp(M - m_new);
      for (int d = 0; d < hv; ++d) acc32[d] *= ms;
      S *= ms;
    }
    M = m_new;
    // ggml_vec_soft_max_f32 over the whole tile of 64 (keys past the tile are masked to 0):
    // ggml's SIMD expf, exponentials summed per 16 in float (pairwise), then in double.
    double sum = 0.0;
    for (int64_t t0 = 0; t0 < tile; t0 += 16) {
      float lanes[16] = {};
      for (int64_t t = t0; t < std::min(tile, t0 + 16); ++t) {
        scores[t] = t < first ? 0.0f : ggml_vec_expf(scores[t] - M);
        lanes[t - t0] = scores[t];
      }
      for (int width = 8; width > 0; width /= 2)
        for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
      sum += double(lanes[0]);
    }
    S = float(double(S) + sum);
    for (int64_t t = 0; t < tile; ++t) {
      const uint8_t* vrow = V.row(j0 + t) + v_head_off;
      const float p = scores[t];
      if (f16) {
        const auto* v = reinterpret_cast<const uint16_t*>(vrow);
        for (int d = 0; d < hv; ++d) acc32[d] = std::fma(p, fp16_to_f32(v[d]), acc32[d]);
      } else {
        const auto* v = reinterpret_cast<const float*>(vrow);
        for (int d = 0; d < hv; ++d) acc32[d] = std::fma(p, v[d], acc32[d]);
      }
    }
  }
  const float sink_ms = a.sinks ? apply_sink(a.sinks[h], M, S) : 1.0f;
  const float s_inv = S == 0.0f ? 0.0f : 1.0f / S;
  float* out = a.out + (r * a.n_head + h) * hv;
  for (int d = 0; d < hv; ++d) out[d] = (sink_ms != 1.0f ? acc32[d] * sink_ms : acc32[d]) * s_inv;
}

}  // namespace

void ReferenceKernels::attention(const AttentionArgs& a) const {
  if (a.n_head <= 0 || a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    throw_error("attention: {} query heads cannot share {} KV heads", a.n_head, a.n_head_kv);
  if (a.kv_type != QuantType::F16 && a.kv_type != QuantType::F32)
    throw_error("attention: KV type {} is not supported (f16 or f32)", quant_name(a.kv_type));
  const int64_t pairs = a.n_rows * a.n_head;
  ThreadPool::global().parallel_for(pairs, 1, [&](int64_t p0, int64_t p1) {
    const size_t hd = size_t(a.head_dim), hv = size_t(a.head_dim_v > 0 ? a.head_dim_v : a.head_dim);
    std::vector<uint16_t> q16(hd), acc16(hv);
    std::vector<float> acc32(hv), scores(kKvTile), kf(hd);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r = p / a.n_head;
      const int h = int(p % a.n_head);
      if (a.f32_tiles)
        attend_tiled(a, r, h, acc32, scores, kf);
      else
        attend_one_chunk(a, r, h, q16, acc16, acc32);
    }
  });
}

}  // namespace jitllm
