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
)";

// The indexed matvecs (NT 1): pair p of the launch (blockIdx.y) multiplies activation row
// p / xdiv by expert ids[p] of a table [n_expert][2] of (weights, scale plane) addresses, and
// writes out [pairs][rows]. matvec_ids: grid (ceil(rows / (4 RPW)), pairs), block 128.
// matvec_ids_swiglu (gate = tab0, up = tab1, RPW 4, rows a multiple of 32): grid (rows / 32,
// pairs), block 256; writes silu(gate) * up and its q8 blocks (nq, nds) for the down matvec.
constexpr const char* kMatvecIds = R"(
struct MvIdArgs {
  u64 tab0, tab1, ids, xq, xds, xf, out, nq, nds;
  int rows, xdiv, pad0, pad1;
};
#if SWIGLU
extern "C" __global__ void __launch_bounds__(256) matvec_ids_swiglu(const MvIdArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int p = blockIdx.y, e = ((const int*)a.ids)[p];
  const u64* g = (const u64*)a.tab0 + 2 * e;
  const u64* u = (const u64*)a.tab1 + 2 * e;
  const int r0 = blockIdx.x * 32 + w * RPW;
  int rr[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) rr[j] = r0 + j;
  float ga[RPW][1], ua[RPW][1];
#pragma unroll
  for (int j = 0; j < RPW; ++j) ga[j][0] = ua[j][0] = 0.0f;
  const int c0 = p / a.xdiv;
  Mv<KIND0>::run((const u8*)g[0], (const u8*)g[1], rr, lane, (const i8*)a.xq, (const float2*)a.xds,
                 (const float*)a.xf, c0, ga);
  Mv<KIND1>::run((const u8*)u[0], (const u8*)u[1], rr, lane, (const i8*)a.xq, (const float2*)a.xds,
                 (const float*)a.xf, c0, ua);
  __shared__ float hs[32];
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
    const float gv = warp_sum(ga[j][0]), uv = warp_sum(ua[j][0]);
    if (lane == 0) hs[w * RPW + j] = gv / (1.0f + expf(-gv)) * uv;
  }
  __syncthreads();
  if (w == 0) {
    const float v = hs[lane];
    ((float*)a.out)[(size_t)p * a.rows + blockIdx.x * 32 + lane] = v;
    q8_block(v, lane, (i8*)a.nq, (float2*)a.nds, (long long)p * (a.rows / 32) + blockIdx.x);
  }
}
#else
extern "C" __global__ void __launch_bounds__(128) matvec_ids(const MvIdArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int lane = threadIdx.x & 31;
  const int r0 = (blockIdx.x * 4 + (threadIdx.x >> 5)) * RPW;
  if (r0 >= a.rows) return;
  const int p = blockIdx.y, e = ((const int*)a.ids)[p];
  const u64* t = (const u64*)a.tab0 + 2 * e;
  int rr[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) rr[j] = min(r0 + j, a.rows - 1);  // past the end: reread the last row
  float acc[RPW][1];
#pragma unroll
  for (int j = 0; j < RPW; ++j) acc[j][0] = 0.0f;
  Mv<KIND0>::run((const u8*)t[0], (const u8*)t[1], rr, lane, (const i8*)a.xq, (const float2*)a.xds,
                 (const float*)a.xf, p / a.xdiv, acc);
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
    const float s = warp_sum(acc[j][0]);
    if (lane == 0 && r0 + j < a.rows) ((float*)a.out)[(size_t)p * a.rows + r0 + j] = s;
  }
}
#endif
)";

}  // namespace

std::string moe_source() { return std::string(kernel_prelude()) + kMoe; }

const char* matvec_ids_text() { return kMatvecIds; }

}  // namespace jitllm::cuda
