// CUDA C++ text of the logits pick (logits_pick.h): a sampler's candidates selected on the card.
#include "backend/cuda/kernel_source.h"

namespace jitllm::cuda {

namespace {

// One CTA of 1024 threads per requested row of x [rows][stride], over its first `cols` columns.
// spec[r] = {top, out_off, extra_off, extra_n, log_norm, mask_off, 0, 0}: mask_off >= 0 is the
// row's grammar mask in `masks` (64 columns a word; a masked column counts and comes as -inf for
// the selection and the extra columns, raw for bad / max / lse). Writes, in `out`:
// ids / vals [sum of top] at out_off (the `top` best of the row, in no order: the host sorts),
// extra [sum of extra_n] at extra_off, and per row bad (the lowest NaN / +inf column or -1),
// stat_f[2] (max, the bad value) and lse (log sum exp(x - max), double).
// A greedy row (top 1, no mask) takes the lowest column of the max from the first pass.
// Selection: a radix select over order-preserving 32-bit keys finds the top-th largest key T
// (4 passes of 8 bits, histograms aggregated per warp); keys above T are taken in any order,
// keys equal to T in column order (a block scan per 1024 columns) until `top` are taken: the
// host's order, ties to the lower column.
constexpr const char* kPick = R"(
__device__ __forceinline__ u32 order_key(float f) {
  if (f == 0.0f) f = 0.0f;  // -0 ties +0, as float comparison does
  const u32 u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// Exclusive prefix over the block of flag (1024 threads); total to *total (shared, all read it).
__device__ __forceinline__ int block_scan(int flag, int* warp_sums, int* total) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const u32 ballot = __ballot_sync(0xffffffffu, flag);
  const int in_warp = __popc(ballot & ((1u << lane) - 1u));
  if (lane == 0) warp_sums[w] = __popc(ballot);
  __syncthreads();
  if (w == 0) {
    int v = warp_sums[lane], inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += n;
    }
    warp_sums[lane] = inc - v;
    if (lane == 31) *total = inc;
  }
  __syncthreads();
  return warp_sums[w] + in_warp;
}
extern "C" __global__ void __launch_bounds__(1024) pick_logits(
    const float* __restrict__ x, long long stride, int cols, const int* __restrict__ spec,
    const int* __restrict__ extra_ids, const u64* __restrict__ masks, int* __restrict__ ids,
    float* __restrict__ vals, float* __restrict__ extra, int* __restrict__ bad,
    float* __restrict__ stat_f, double* __restrict__ lse) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int r = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const int top = spec[8 * r], out_off = spec[8 * r + 1], extra_off = spec[8 * r + 2];
  const int extra_n = spec[8 * r + 3], log_norm = spec[8 * r + 4], mask_off = spec[8 * r + 5];
  const float* xr = x + (size_t)r * stride;
  const u64* gmask = mask_off >= 0 ? masks + mask_off : 0;
  // Column c's value as the selection sees it: -inf where the mask leaves it out.
#define PICK_VALUE(c) ((!gmask || ((gmask[(c) >> 6] >> ((c) & 63)) & 1ull)) ? xr[c] : NEG_INF)
  __shared__ int s_bad, s_total, s_remaining, s_taken;
  __shared__ u32 s_prefix, s_mask;
  __shared__ int warp_sums[32];
  __shared__ float s_max[32];
  __shared__ u32 hist[32][256];
  if (tid == 0) s_bad = 0x7fffffff;
  __syncthreads();
  // The max and its lowest column (each thread sees its columns in order, so a strictly larger
  // value moves it; -0 ties +0): a greedy row's pick without a mask needs nothing more.
  __shared__ int s_arg[32];
  float mx = NEG_INF;
  int arg = -1;
#pragma unroll 4
  for (int c = tid; c < cols; c += nt) {
    const float v = xr[c];
    if (v != v || v == __int_as_float(0x7f800000)) atomicMin(&s_bad, c);
    if (v > mx || arg < 0) { mx = v; arg = c; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, mx, o);
    const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
    if (oa >= 0 && (arg < 0 || om > mx || (om == mx && oa < arg))) { mx = om; arg = oa; }
  }
  if ((tid & 31) == 0) { s_max[tid >> 5] = mx; s_arg[tid >> 5] = arg; }
  __syncthreads();
  if (s_bad != 0x7fffffff) {
    if (tid == 0) { bad[r] = s_bad; stat_f[2 * r + 1] = xr[s_bad]; }
    return;
  }
  if (tid < 32) {
    mx = tid < (nt >> 5) ? s_max[tid] : NEG_INF;
    arg = tid < (nt >> 5) ? s_arg[tid] : -1;
    for (int o = 16; o > 0; o >>= 1) {
      const float om = __shfl_xor_sync(0xffffffffu, mx, o);
      const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
      if (oa >= 0 && (arg < 0 || om > mx || (om == mx && oa < arg))) { mx = om; arg = oa; }
    }
    if (tid == 0) { s_max[0] = mx; s_arg[0] = arg; }
  }
  __syncthreads();
  mx = s_max[0];
  if (tid == 0) { bad[r] = -1; stat_f[2 * r] = mx; }
  for (int j = tid; j < extra_n; j += nt) {
    const int c = extra_ids[extra_off + j];
    extra[extra_off + j] = PICK_VALUE(c);
  }
  if (log_norm) {
    double sum = 0.0;
    for (int c = tid; c < cols; c += nt) sum += exp((double)xr[c] - (double)mx);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    __shared__ double s_sum[32];
    if ((tid & 31) == 0) s_sum[tid >> 5] = sum;
    __syncthreads();
    if (tid == 0) {
      double t = 0.0;
      for (int w = 0; w < (nt >> 5); ++w) t += s_sum[w];
      lse[r] = log(t);
    }
  }
  if (top <= 0) return;
  if (top == 1 && !gmask) {  // the lowest column of the max: the pick of a greedy row
    if (tid == 0) { ids[out_off] = s_arg[0]; vals[out_off] = xr[s_arg[0]]; }
    return;
  }
  // Radix select: the key T of the top-th largest, and how many keys equal to T to take.
  if (tid == 0) { s_prefix = 0u; s_mask = 0u; s_remaining = top; }
  const int lane = tid & 31, w = tid >> 5;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 32 * 256; i += nt) (&hist[0][0])[i] = 0u;
    __syncthreads();
    const u32 prefix = s_prefix, mask = s_mask;
    for (int c0 = 0; c0 < cols; c0 += nt) {
      const int c = c0 + tid;
      const u32 k = c < cols ? order_key(PICK_VALUE(c)) : 0u;
      const bool in = c < cols && (k & mask) == prefix;
      const u32 digit = (k >> shift) & 255u;
      // Lanes with the same digit add once (a warp's logits share a few bins).
      const u32 active = __ballot_sync(0xffffffffu, in);
      if (in) {
        const u32 same = __match_any_sync(active, digit);
        if (lane == __ffs(same) - 1) atomicAdd(&hist[w][digit], (u32)__popc(same));
      }
    }
    __syncthreads();
    // Sum the warps' histograms per bin (256 threads), then one thread walks down from the top.
    if (tid < 256) {
      u32 t = 0;
      for (int ww = 0; ww < (nt >> 5); ++ww) t += hist[ww][tid];
      hist[0][tid] = t;
    }
    __syncthreads();
    if (tid == 0) {
      int remaining = s_remaining;
      for (int d = 255; d >= 0; --d) {
        const int n = (int)hist[0][d];
        if (n >= remaining) {
          s_prefix |= (u32)d << shift;
          break;
        }
        remaining -= n;
      }
      s_remaining = remaining;
      s_mask |= 255u << shift;
    }
    __syncthreads();
  }
  const u32 T = s_prefix;
  const int n_eq = s_remaining;  // keys equal to T to take, the lowest columns first
  if (tid == 0) s_taken = 0;
  __syncthreads();
  int* ids_r = ids + out_off;
  float* vals_r = vals + out_off;
  for (int c = tid; c < cols; c += nt) {
    const float v = PICK_VALUE(c);
    if (order_key(v) > T) {
      const int i = atomicAdd(&s_taken, 1);
      ids_r[i] = c;
      vals_r[i] = v;
    }
  }
  __syncthreads();
  const int base = s_taken;  // == top - n_eq
  int taken = 0;
  for (int c0 = 0; c0 < cols && taken < n_eq; c0 += nt) {
    const int c = c0 + tid;
    const float v = c < cols ? PICK_VALUE(c) : 0.0f;
    const int eq = c < cols && order_key(v) == T;
    const int pos = taken + block_scan(eq, warp_sums, &s_total);
    if (eq && pos < n_eq) {
      ids_r[base + pos] = c;
      vals_r[base + pos] = v;
    }
    taken += s_total;
    __syncthreads();  // s_total and warp_sums are rewritten by the next scan
  }
#undef PICK_VALUE
}
)";

}  // namespace

std::string pick_source() { return std::string(kernel_prelude()) + kPick; }

}  // namespace jitllm::cuda
