// CUDA C++ text of the mixture-of-experts kernels (see kernel_source.h): the router's top-k on
// the card, the row gather and the weighted combine (module "moe kernels"), and the indexed
// matvecs that read each (row, expert) pair's expert through a device table of expert addresses
// (appended to a matvec source whose spec asks for them, so they share its Mv<KIND> bodies).
#include <fmt/format.h>

#include "backend/cuda/kernel_source.h"

namespace jitllm::cuda {

namespace {

constexpr const char* kMoe = R"(
#define MOE_MAX_EXPERTS 256
#define MOE_PER_LANE (MOE_MAX_EXPERTS / 32)
// One warp per row of router logits [n][E] (E <= 256, k <= 32): the k experts of highest logit,
// highest first, ties to the lower id (route_experts' order), into ids [n][k], and their weights
// into weights [n][k]: softmax over all E (softmax_all) or over the chosen k, then optionally
// divided by their sum (norm), then times scale (scale 0 or 1: none). A NaN logit counts as
// -inf, so a row holding NaN still chooses k experts in range.
extern "C" __global__ void __launch_bounds__(32) moe_route(const float* __restrict__ logits,
    int* __restrict__ ids, float* __restrict__ weights, int E, int k, int softmax_all, int norm,
    float scale) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int row = blockIdx.x, lane = threadIdx.x;
  const float* l = logits + (size_t)row * E;
  float v[MOE_PER_LANE];
#pragma unroll
  for (int i = 0; i < MOE_PER_LANE; ++i) {
    const int e = lane + 32 * i;
    const float x = e < E ? l[e] : NEG_INF;
    v[i] = x != x ? NEG_INF : x;
  }
  unsigned taken = 0;  // bit i: v[i] is chosen
  float mine = NEG_INF;  // lane j < k: the j-th chosen logit
  float top = NEG_INF;
  for (int j = 0; j < k; ++j) {
    float bv = NEG_INF;
    int bi = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < MOE_PER_LANE; ++i) {
      const int e = lane + 32 * i;
      if (e < E && !((taken >> i) & 1u) && (v[i] > bv || (v[i] == bv && e < bi))) { bv = v[i]; bi = e; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
    }
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
    if (lane == j) mine = bv;
    if (j == 0) top = bv;
    if (lane == 0) ids[(size_t)row * k + j] = bi;
  }
  float w = lane < k ? expf(mine - top) : 0.0f;
  float sum;
  if (softmax_all) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < MOE_PER_LANE; ++i)
      if (lane + 32 * i < E) s += expf(v[i] - top);
    sum = warp_sum(s);
  } else {
    sum = warp_sum(w);
  }
  w = w / sum;
  if (norm) w = w / warp_sum(w);
  if (scale != 0.0f && scale != 1.0f) w *= scale;
  if (lane < k) weights[(size_t)row * k + lane] = w;
}

// out[r] = x[rows[r]] (cols floats a row): one block per output row.
extern "C" __global__ void gather_rows(const float* __restrict__ x, float* __restrict__ out,
                                       const int* __restrict__ rows, int cols) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int r = blockIdx.x;
  const float* src = x + (size_t)rows[r] * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[(size_t)r * cols + c] = src[c];
}

// out[r][c] = sum over j < k of w[r k + j] * ys[at(r k + j)][c], at(p) = where ? where[p] : p,
// then + g(r) * shared[r][c] when shared is set, g(r) = sigmoid(sgate[r]) or 1 without sgate.
// The terms are added in that order, the first assigning (weighted_sum_rows' order).
extern "C" __global__ void moe_combine(const float* __restrict__ ys, float* __restrict__ out,
                                       const int* __restrict__ where, const float* __restrict__ w,
                                       int k, int cols, const float* __restrict__ shared,
                                       const float* __restrict__ sgate) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int r = blockIdx.x;
  const float g = shared && sgate ? 1.0f / (1.0f + expf(-sgate[r])) : 1.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int p = r * k + j;
      const float t = w[p] * ys[(size_t)(where ? where[p] : p) * cols + c];
      acc = j == 0 ? t : acc + t;
    }
    if (shared) acc = acc + g * shared[(size_t)r * cols + c];
    out[(size_t)r * cols + c] = acc;
  }
}

#define MOE_SORT_MAX_PAIRS 4096
// The pairs [pairs] (expert ids, k a row) in expert order, one CTA: offset [E + 1] (expert e's
// run is [offset[e], offset[e + 1])), src [pairs] (the activation row of each position, p / k),
// where [pairs] (each pair's position). Within an expert the pairs keep their order, so the
// layout depends only on the ids.
extern "C" __global__ void __launch_bounds__(256) moe_sort(const int* __restrict__ ids, int pairs,
    int E, int k, int* __restrict__ offset, int* __restrict__ src, int* __restrict__ where) {
  PDL_TRIGGER();
  PDL_WAIT();
  __shared__ int id[MOE_SORT_MAX_PAIRS];
  __shared__ int start[MOE_MAX_EXPERTS + 1];
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) id[p] = ids[p];
  for (int e = threadIdx.x; e <= E; e += blockDim.x) start[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) atomicAdd(&start[id[p]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (int e = 0; e < E; ++e) {
      const int c = start[e];
      start[e] = sum;
      offset[e] = sum;
      sum += c;
    }
    offset[E] = sum;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int at = start[e];
    for (int p = 0; p < pairs; ++p)
      if (id[p] == e) {
        src[at] = p / k;
        where[p] = at;
        ++at;
      }
  }
}
)";

// The indexed matvecs. Per pair (NT 1): pair p of the launch (blockIdx.y) multiplies activation
// row p / xdiv by expert ids[p] of a table [n_expert][2] of (weights, scale plane) addresses, and
// writes out [pairs][rows]. matvec_ids: grid (ceil(rows / (4 RPW)), pairs), block 128.
// matvec_ids_swiglu (gate = tab0, up = tab1, RPW 4, rows a multiple of 32): grid (rows / 32,
// pairs), block 256; writes silu(gate) * up and its q8 blocks (nq, nds) for the down matvec.
// Grouped (any NT up to 8): the activation rows are in expert order (moe_sort), `ids` is the
// offsets [n_expert + 1], and CTA column e (blockIdx.y) runs expert e once over its rows
// [offset[e], offset[e + 1]) in tiles of NT, so each chosen expert's weights are read once a
// tile instead of once a pair. The last tile reads up to NT - 1 rows past the expert's run
// (their results are not stored), so the activation buffers hold NT rows past the last pair.
// matvec_grouped: grid (ceil(rows / (4 RPW)), n_expert), block 128; matvec_grouped_swiglu: grid
// (rows / 32, n_expert), block 256.
constexpr const char* kMatvecIds = R"(
struct MvIdArgs {
  u64 tab0, tab1, ids, xq, xds, xf, out, nq, nds;
  int rows, xdiv, pad0, pad1;
  u64 bias0, bias1;  // [n_expert][rows] f32 added to tab0's / tab1's products (gpt-oss), or 0
  float alpha, limit;  // limit > 0: gpt-oss's clamped SwiGLU (graph/ops.h swiglu_oai)
};
#if SWIGLU
// One tile through expert e's gate and up: activation rows x0 .. x0 + NT - 1 (this CTA's 32
// weight rows), the first `valid` results stored at output rows o0 .. o0 + valid - 1 with
// their q8 blocks. Every thread of the CTA calls it (it synchronises).
__device__ __forceinline__ void ids_swiglu_tile(const MvIdArgs& a, int e, int x0, int o0, int valid) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const u64* g = (const u64*)a.tab0 + 2 * e;
  const u64* u = (const u64*)a.tab1 + 2 * e;
  const int r0 = blockIdx.x * 32 + w * RPW;
  int rr[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) rr[j] = r0 + j;  // rows is a multiple of 32
  float ga[RPW][NT], ua[RPW][NT];
#pragma unroll
  for (int j = 0; j < RPW; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) ga[j][t] = ua[j][t] = 0.0f;
  Mv<KIND0>::run((const u8*)g[0], (const u8*)g[1], rr, lane, (const i8*)a.xq, (const float2*)a.xds,
                 (const float*)a.xf, x0, ga);
  Mv<KIND1>::run((const u8*)u[0], (const u8*)u[1], rr, lane, (const i8*)a.xq, (const float2*)a.xds,
                 (const float*)a.xf, x0, ua);
  __shared__ float hs[NT][32];
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float gv = warp_sum(ga[j][t]), uv = warp_sum(ua[j][t]);
      const size_t b = (size_t)e * a.rows + rr[j];
      if (a.bias0) gv += ((const float*)a.bias0)[b];
      if (a.bias1) uv += ((const float*)a.bias1)[b];
      float v;
      if (a.limit > 0.0f) {  // the swiglu_oai kernel's expression
        const float x = fminf(gv, a.limit), y = fminf(fmaxf(uv, -a.limit), a.limit);
        v = x / (1.0f + expf(a.alpha * -x)) * (y + 1.0f);
      } else {
        v = gv / (1.0f + expf(-gv)) * uv;
      }
      if (lane == 0) hs[t][w * RPW + j] = v;
    }
  }
  __syncthreads();
  if (w < valid) {
    const int t = o0 + w;
    const float v = hs[w][lane];
    ((float*)a.out)[(size_t)t * a.rows + blockIdx.x * 32 + lane] = v;
    q8_block(v, lane, (i8*)a.nq, (float2*)a.nds, (long long)t * (a.rows / 32) + blockIdx.x);
  }
  __syncthreads();  // hs is reused by the next tile
}
#if NT == 1
extern "C" __global__ void __launch_bounds__(256) matvec_ids_swiglu(const MvIdArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int p = blockIdx.y;
  ids_swiglu_tile(a, ((const int*)a.ids)[p], p / a.xdiv, p, 1);
}
#endif
extern "C" __global__ void __launch_bounds__(256) matvec_grouped_swiglu(const MvIdArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int e = blockIdx.y;
  const int first = ((const int*)a.ids)[e], end = ((const int*)a.ids)[e + 1];
  // (first == end: the whole CTA skips the loop; an expert no row chose is never read)
  for (int c0 = first; c0 < end; c0 += NT) ids_swiglu_tile(a, e, c0, c0, min(NT, end - c0));
}
#else
// One tile through expert e: activation rows x0 .. x0 + NT - 1 against this warp's RPW weight
// rows from r0 (< rows), the first `valid` results stored at output rows o0 .. o0 + valid - 1.
__device__ __forceinline__ void ids_tile(const MvIdArgs& a, int e, int x0, int o0, int valid, int r0) {
  const int lane = threadIdx.x & 31;
  const u64* tb = (const u64*)a.tab0 + 2 * e;
  int rr[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) rr[j] = min(r0 + j, a.rows - 1);  // past the end: reread the last row
  float acc[RPW][NT];
#pragma unroll
  for (int j = 0; j < RPW; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[j][t] = 0.0f;
  Mv<KIND0>::run((const u8*)tb[0], (const u8*)tb[1], rr, lane, (const i8*)a.xq, (const float2*)a.xds,
                 (const float*)a.xf, x0, acc);
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float s = warp_sum(acc[j][t]);
      if (a.bias0 && r0 + j < a.rows) s += ((const float*)a.bias0)[(size_t)e * a.rows + r0 + j];
      if (lane == 0 && t < valid && r0 + j < a.rows) ((float*)a.out)[(size_t)(o0 + t) * a.rows + r0 + j] = s;
    }
  }
}
#if NT == 1
extern "C" __global__ void __launch_bounds__(128) matvec_ids(const MvIdArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int r0 = (blockIdx.x * 4 + (threadIdx.x >> 5)) * RPW;
  if (r0 >= a.rows) return;
  const int p = blockIdx.y;
  ids_tile(a, ((const int*)a.ids)[p], p / a.xdiv, p, 1, r0);
}
#endif
extern "C" __global__ void __launch_bounds__(128) matvec_grouped(const MvIdArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int e = blockIdx.y;
  const int first = ((const int*)a.ids)[e], end = ((const int*)a.ids)[e + 1];
  const int r0 = (blockIdx.x * 4 + (threadIdx.x >> 5)) * RPW;
  if (r0 >= a.rows) return;
  for (int c0 = first; c0 < end; c0 += NT) ids_tile(a, e, c0, c0, min(NT, end - c0), r0);
}
#endif
)";

}  // namespace

std::string moe_source() { return std::string(kernel_prelude()) + kMoe; }

const char* matvec_ids_text() { return kMatvecIds; }

}  // namespace jitllm::cuda
