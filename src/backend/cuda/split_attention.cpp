// Split-K decode attention ("flash decoding") for long contexts: the keys of each (row, head) are
// split over several CTAs (CudaKernels::attention_split) and the partial softmax states merged by
// log-sum-exp in a second launch (attention_merge), so a decode step over thousands of positions
// keeps the card busy instead of 4 warps per head walking every key. A row's split count depends
// only on its own key count (ceil(n_kv / kSplitChunk), at most the launch's max_splits), so a
// row's result never depends on what else is in the step; a row of one split gives exactly the
// bits of the single-CTA attention kernel (the merge multiplies by exp(0) = 1 and divides by the
// same sum).
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cuda_kernels.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

// Keys per split: 256 = 64 per warp of the CTA.
constexpr int kSplitChunk = 256;

// attention_split: grid (n_rows, n_head, max_splits), block 128; CTA (row, h, sp) attends to the
// keys [sp * per, (sp + 1) * per) of its row (per = ceil(n_kv / splits)) exactly as the
// attention kernel's 4 warps do (online softmax per warp, then merged), and writes the
// unnormalized state (m, l, acc[HD]) to part[row][h][sp]. attention_merge: grid (n_rows, n_head),
// block 128; combines the row's splits and writes out (and its q8 blocks when xq is set).
constexpr const char* kSplitAttention = R"(
constexpr int E = (HD + 31) / 32;  // head dims per lane
__device__ __forceinline__ float kv_load(const u8* row, int d) {
  return KV_F16 ? h2f(((const u16*)row)[d]) : ((const float*)row)[d];
}
__device__ __forceinline__ int split_count(int nk, int smax) {
  return min(smax, max(1, (nk + CHUNK - 1) / CHUNK));
}
extern "C" __global__ void __launch_bounds__(128)
attention_split(const float* __restrict__ q, float* __restrict__ part, const u64* __restrict__ pages,
                const int* __restrict__ row_pt, const int* __restrict__ n_kv, u64 koff, u64 voff,
                int page_tokens, int row_bytes, int n_head, int group, float scale, int smax,
                int window, float softcap) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int row = blockIdx.x, h = blockIdx.y, sp = blockIdx.z, hk = h / group;
  const int nk = n_kv[row];
  const int first = window > 0 ? max(0, nk - window) : 0;  // a sliding window's first key
  const int ns = split_count(nk - first, smax);
  if (sp >= ns) return;  // the whole CTA: no barrier below is skipped by part of it
  const int per = (nk - first + ns - 1) / ns;
  const int k0 = first + sp * per, k1 = min(nk, k0 + per);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* qr = q + ((size_t)row * n_head + h) * HD;
  float qv[E], acc[E];
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < HD ? qr[d] : 0.0f;
    acc[i] = 0.0f;
  }
  const u64* pt = pages + row_pt[row];
  float m = NEG_INF, l = 0.0f;
  for (int p = k0 + warp; p < k1; p += 4) {
    const u8* base = (const u8*)pt[p / page_tokens] + (size_t)(p % page_tokens) * row_bytes +
                     (size_t)hk * HD * (KV_F16 ? 2 : 4);
    const u8* kr = base + koff;
    const u8* vr = base + voff;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int d = lane + 32 * i;
      if (d < HD) s += qv[i] * kv_load(kr, d);
    }
    s = warp_sum(s) * scale;
    if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
    const float mn = fmaxf(m, s);
    const float corr = expf(m - mn), e = expf(s - mn);
    l = l * corr + e;
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * corr + (d < HD ? e * kv_load(vr, d) : 0.0f);
    }
    m = mn;
  }
  __shared__ float sm[4], sl[4], sacc[4][E * 32];
  if (lane == 0) { sm[warp] = m; sl[warp] = l; }
#pragma unroll
  for (int i = 0; i < E; ++i) sacc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float M = NEG_INF;
  for (int w = 0; w < 4; ++w) M = fmaxf(M, sm[w]);
  float L = 0.0f, f[4];
  for (int w = 0; w < 4; ++w) {
    f[w] = sm[w] == NEG_INF ? 0.0f : expf(sm[w] - M);
    L += sl[w] * f[w];
  }
  float* pr = part + (((size_t)row * n_head + h) * smax + sp) * (HD + 2);
  if (lane == 0) { pr[0] = M; pr[1] = L; }
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const int d = lane + 32 * i;
    if (d < HD) {
      float v = 0.0f;
      for (int w = 0; w < 4; ++w) v += sacc[w][d] * f[w];
      pr[2 + d] = v;
    }
  }
}
extern "C" __global__ void __launch_bounds__(128)
attention_merge(const float* __restrict__ part, float* __restrict__ out, const int* __restrict__ n_kv,
                int n_head, int smax, i8* __restrict__ xq, float2* __restrict__ xds,
                u16* __restrict__ xh, int window, const float* __restrict__ sinks) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int row = blockIdx.x, h = blockIdx.y, lane = threadIdx.x & 31;
  const int nk = n_kv[row];
  const int ns = split_count(window > 0 ? min(nk, window) : nk, smax);
  const float* pr = part + ((size_t)row * n_head + h) * smax * (HD + 2);
  // gpt-oss's sink: one more state with l = 1 and no value.
  const float sink = sinks ? sinks[h] : NEG_INF;
  float M = sink;
  for (int s = 0; s < ns; ++s) M = fmaxf(M, pr[(size_t)s * (HD + 2)]);
  float L = sink == NEG_INF ? 0.0f : expf(sink - M);
  for (int s = 0; s < ns; ++s) {
    const float ms = pr[(size_t)s * (HD + 2)];
    L += pr[(size_t)s * (HD + 2) + 1] * (ms == NEG_INF ? 0.0f : expf(ms - M));
  }
  float* o = out + ((size_t)row * n_head + h) * HD;
  // Whole warps per pass (E * 32 dims), so the q8 blocks below see all their lanes.
  for (int d = threadIdx.x; d < E * 32; d += 128) {
    float v = 0.0f;
    if (d < HD) {
      for (int s = 0; s < ns; ++s) {
        const float ms = pr[(size_t)s * (HD + 2)];
        v += pr[(size_t)s * (HD + 2) + 2 + d] * (ms == NEG_INF ? 0.0f : expf(ms - M));
      }
      v = L > 0.0f ? v / L : 0.0f;
      o[d] = v;
    }
#if HD % 32 == 0
    if (xq) q8_block(v, lane, xq, xds, (((long long)row * n_head + h) * HD + (d - lane)) / 32, xh);
#endif
  }
}
)";

}  // namespace

std::string split_attention_source(int head_dim, bool kv_f16) {
  if (head_dim <= 0 || head_dim > 512)
    throw_error("split attention: head size {} is not in [1, 512]", head_dim);
  return fmt::format("#define HD {}\n#define KV_F16 {}\n#define CHUNK {}\n", head_dim,
                     kv_f16 ? 1 : 0, kSplitChunk) +
         kernel_prelude() + kSplitAttention;
}

int CudaKernels::split_count(int64_t n_kv, int max_splits) {
  return int(std::clamp<int64_t>((n_kv + kSplitChunk - 1) / kSplitChunk, 1, max_splits));
}

size_t CudaKernels::split_scratch_bytes(int64_t n_rows, int n_head, int head_dim, int max_splits) {
  return size_t(n_rows) * size_t(n_head) * size_t(max_splits) * size_t(head_dim + 2) * 4;
}

int CudaKernels::attention_splits_that_pay(int64_t n_rows, int n_head, int64_t max_n_kv, int sm_count,
                                           int max_splits) {
  // A cost model in units of one warp loop step (about one K/V memory latency each), from the
  // launch shapes alone. The split kernel gets at most as many splits as keep its n_rows x n_head
  // x splits CTAs in one wave of what the card holds at once (kCtasPerSm CTAs of 128 threads per
  // SM; the attention kernels' 32-48 registers allow 10 or more), so the single-CTA kernel's
  // n_rows x n_head CTAs are in one wave too. Single kernel: 4 warps taking
  // attention_keys_per_step() keys per step walk the longest row, n_kv / (4 keys) steps. Split
  // kernel: each warp one key per step over a quarter of its split, at most
  // max(kSplitChunk, n_kv / splits) keys (chunks of 256 until the splits run out), then the
  // merge launch (kMergeSteps). In real numbers both costs grow linearly in n_kv, so once the
  // split pays it pays for every longer context with the same count (rounding steps up made the
  // choice flip back and forth near the switch). It agrees with the five yes/no outcomes measured
  // on the H200 (docs/cuda-sessions-together.md, session 7: long contexts).
  constexpr int64_t kCtasPerSm = 8;
  constexpr double kMergeSteps = 16;
  if (n_rows <= 0 || n_head <= 0 || max_n_kv <= kSplitChunk || sm_count <= 0) return 0;
  const int64_t resident = int64_t(sm_count) * kCtasPerSm;
  const int64_t splits = std::min<int64_t>(max_splits, resident / (n_rows * n_head));
  if (splits < 2) return 0;
  const double n_kv = double(max_n_kv);
  const double single = n_kv / (4.0 * attention_keys_per_step());
  const double split = std::max(double(kSplitChunk), n_kv / double(splits)) / 4.0 + kMergeSteps;
  return split < single ? int(splits) : 0;
}

const std::pair<CUfunction, CUfunction>& CudaKernels::split_functions(int head_dim, bool kv_f16) {
  const auto key = std::make_pair(head_dim, kv_f16);
  auto it = split_attention_.find(key);
  if (it == split_attention_.end()) {
    const Module& m = compiler_.module(split_attention_source(head_dim, kv_f16),
                                       fmt::format("split attention head_dim={}", head_dim));
    it = split_attention_.emplace(key, std::make_pair(m.function("attention_split"),
                                                      m.function("attention_merge"))).first;
  }
  return it->second;
}

void CudaKernels::attention_split(const AttentionCall& a, int max_splits, CUdeviceptr scratch,
                                  const Stream& s) {
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    throw_error("attention: {} query heads do not group over {} KV heads", a.n_head, a.n_head_kv);
  if (a.q8.q && a.head_dim % 32 != 0)
    throw_error("attention: quantized output needs a head size that is a multiple of 32, not {}",
                a.head_dim);
  if (max_splits < 1 || max_splits > 1024)
    throw_error("split attention: {} splits (1 to 1024)", max_splits);
  const auto& fns = split_functions(a.head_dim, a.kv_f16);
  CUdeviceptr q = a.q, out = a.out, pages = a.pages, row_pt = a.row_pt, n_kv = a.n_kv;
  CUdeviceptr part = scratch, xq = a.q8.q, xds = a.q8.ds, xh = a.q8.h;
  unsigned long long koff = a.koff, voff = a.voff;
  int pt = a.page_tokens, rb = a.row_bytes, nh = a.n_head, group = a.n_head / a.n_head_kv;
  int smax = max_splits;
  float scale = a.scale, softcap = a.softcap;
  int window = a.window;
  void* args[] = {&q, &part, &pages, &row_pt, &n_kv, &koff, &voff, &pt, &rb, &nh, &group, &scale,
                  &smax, &window, &softcap};
  run3(fns.first, unsigned(a.n_rows), unsigned(a.n_head), unsigned(max_splits), 128, s,
       args, "attention_split");
  CUdeviceptr sinks = a.sinks;
  void* margs[] = {&part, &out, &n_kv, &nh, &smax, &xq, &xds, &xh, &window, &sinks};
  run(fns.second, unsigned(a.n_rows), unsigned(a.n_head), 128, s, margs, "attention_merge");
}

}  // namespace jitllm::cuda
