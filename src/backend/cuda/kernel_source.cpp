// CUDA C++ text of the shared prelude, the element-wise kernels and attention (the matvec is in
// matvec_source.cpp; see kernel_source.h for the launch conventions).
// The sources include no headers: half conversion and dp4a are inline PTX, so NVRTC needs no
// toolkit include directory at run time.
#include "backend/cuda/kernel_source.h"

#include <fmt/format.h>

#include "backend/cuda/weight_formats.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

constexpr const char* kPrelude = R"(
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned long long u64;
#define NEG_INF __int_as_float(0xff800000)
// Programmatic dependent launch (sm_90; no-ops when a kernel was launched without it): every
// kernel lets the next one be scheduled at once (PDL_TRIGGER) and waits for the previous one to
// finish and flush (PDL_WAIT) before reading anything it wrote; a matvec prefetches its weight
// rows into L2 before waiting, so the weight stream overlaps the small kernels before it.
#if __CUDA_ARCH__ >= 900
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define PDL_WAIT()
#define PDL_TRIGGER()
#endif
__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
// One RoPE rotation, rounded op by op (no FMA contraction), so every kernel that rotates (rope,
// rope_store, the matvec's rope epilogue) gives the same bits.
__device__ __forceinline__ float rope_lo(float x0, float x1, float c, float s) {
  return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}
__device__ __forceinline__ float rope_hi(float x0, float x1, float c, float s) {
  return __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}
// Weight loads that stream past L1 (each weight byte is read once per step; L1 stays for the
// activation), 16, 8 and 2 bytes.
__device__ __forceinline__ uint4 ldw16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ldw8(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ u16 ldw2(const void* p) {
  u16 v;
  asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
// 16 bytes global -> shared without a register (cp.async; the caller commits and waits).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
}
// Tensor-core tiles (mmq, dqmma): the fragment rows g and g + 8 of each of M 16-row tiles from
// r0 (rows past the end read the last row; they are never stored), and zeroed accumulators.
template <int M>
__device__ __forceinline__ void tc_rows(int (&row)[M][2], int r0, int g, int rows) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
    row[m][0] = min(r0 + 16 * m + g, rows - 1);
    row[m][1] = min(r0 + 16 * m + g + 8, rows - 1);
  }
}
template <int M, int N>
__device__ __forceinline__ void tc_zero(float (&acc)[M][N][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;
}
// Every accumulator of a thread's M x N mma.sync m16n8k16 tiles with its place: f(value, row of
// the warp's 16 M rows, activation row of the N * 8) (fragment rows g and g + 8, columns 2t and
// 2t + 1 of each tile).
template <int M, int N, class F>
__device__ __forceinline__ void tc_each(const float (&acc)[M][N][4], int g, int t, F f) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) f(acc[m][n][i], 16 * m + g + 8 * (i >> 1), n * 8 + 2 * t + (i & 1));
}
// The tiles of W warps that split the row length of the same 16 M rows, added in shared memory
// red [N * 8 activation rows][rs] in warp order (the same bits on every run), then out[t][r] (and
// res[t][r] += it) for the n activation rows and the rows of [r0, rows).
template <int M, int N, int W>
__device__ __forceinline__ void tc_reduce_store(const float (&acc)[M][N][4], float* red, int rs,
                                                int warp, int g, int t, int r0, int rows, int n,
                                                float* out, float* res) {
  for (int wp = 0; wp < W; ++wp) {
    if (warp == wp)
      tc_each<M, N>(acc, g, t, [&](float v, int r, int tok) {
        float* p = red + tok * rs + r;
        *p = wp == 0 ? v : *p + v;
      });
    __syncthreads();
  }
  for (int i = threadIdx.x; i < 16 * M * N * 8; i += W * 32) {
    const int tok = i / (16 * M), r = i % (16 * M);
    if (tok < n && r0 + r < rows) {
      const float v = red[tok * rs + r];
      const size_t o = (size_t)tok * rows + r0 + r;
      out[o] = v;
      if (res) res[o] += v;
    }
  }
}
__device__ __forceinline__ int dp4a(int a, int b, int c) {
  int r; asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// v (lane's value of a block of 32) to int8 and (d, d * sum), as quantize_q8 below; every lane
// of the warp calls it for the same block. With xh, also f16(q d) there: the f16 activation of
// the batched DQ-MMA kernel (dq_mma.h), as its q8_to_f16 would make it.
__device__ __forceinline__ void q8_block(float v, int lane, i8* __restrict__ xq,
                                         float2* __restrict__ xds, long long blk,
                                         u16* __restrict__ xh = nullptr) {
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const int q = amax == 0.0f ? 0 : __float2int_rn(v / d);
  xq[blk * 32 + lane] = (i8)q;
  if (xh) xh[blk * 32 + lane] = f2h((float)q * d);
  const float sum = warp_sum((float)q);
  if (lane == 0) xds[blk] = make_float2(d, d * sum);
}

)";

constexpr const char* kElementwise = R"(
// One warp per block of 32 values: int8 values and (d, d * sum of the int8 values), as
// llama.cpp's q8_1. xq: [n][k], xds: [n][k / 32].
extern "C" __global__ void quantize_q8(const float* __restrict__ x, i8* __restrict__ xq,
                                       float2* __restrict__ xds, long long nblocks,
                                       u16* __restrict__ xh) {
  PDL_TRIGGER();
  PDL_WAIT();
  const long long blk = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (blk >= nblocks) return;
  const int lane = threadIdx.x & 31;
  q8_block(x[blk * 32 + lane], lane, xq, xds, blk, xh);
}

// x, out: [n][dim]; the sum of squares in double as the CPU reference does.
// Block of RMS_THREADS (1024: a decode row is one CTA, so the serial part per thread is short).
#define RMS_THREADS 1024
__device__ __forceinline__ float rms_scale(const float* __restrict__ xr, int dim, float eps) {
  double s = 0.0;
  for (int i = threadIdx.x; i < dim; i += RMS_THREADS) s += (double)(xr[i] * xr[i]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __shared__ double part[RMS_THREADS / 32];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  double total = 0.0;
  for (int i = 0; i < RMS_THREADS / 32; ++i) total += part[i];
  const float mean = (float)(total / (double)dim);
  return 1.0f / sqrtf(mean + eps);
}
extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ out, int dim, float eps) {
  PDL_TRIGGER();
  PDL_WAIT();
  const float* xr = x + (size_t)blockIdx.x * dim;
  float* yr = out + (size_t)blockIdx.x * dim;
  const float scale = rms_scale(xr, dim, eps);
  for (int i = threadIdx.x; i < dim; i += RMS_THREADS) yr[i] = xr[i] * scale * w[i];
}
// rms_norm, and the result also quantized as quantize_q8 would (dim a multiple of 32; the matvec
// that follows reads the int8 copy): one launch instead of two, same bits.
extern "C" __global__ void rms_norm_q8(const float* __restrict__ x, const float* __restrict__ w,
                                       float* __restrict__ out, i8* __restrict__ xq,
                                       float2* __restrict__ xds, int dim, float eps,
                                       u16* __restrict__ xh) {
  PDL_TRIGGER();
  PDL_WAIT();
  const float* xr = x + (size_t)blockIdx.x * dim;
  float* yr = out + (size_t)blockIdx.x * dim;
  const float scale = rms_scale(xr, dim, eps);
  const int lane = threadIdx.x & 31, nb = dim / 32;
  for (int b = threadIdx.x >> 5; b < nb; b += RMS_THREADS / 32) {
    const int i = b * 32 + lane;
    const float v = xr[i] * scale * w[i];
    yr[i] = v;
    q8_block(v, lane, xq, xds, (long long)blockIdx.x * nb + b, xh);
  }
}

// In place on x: [n][n_heads][head_dim]; cache: [n][n_rot] (cos, sin) pairs made on the host.
extern "C" __global__ void rope(float* __restrict__ x, const float* __restrict__ cache,
                                int n_heads, int head_dim, int n_rot, int neox) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int t = blockIdx.x;
  const int pairs = n_rot / 2;
  const float* cs = cache + (size_t)t * n_rot;
  for (int i = threadIdx.x; i < n_heads * pairs; i += blockDim.x) {
    const int h = i / pairs, j = i % pairs;
    float* v = x + ((size_t)t * n_heads + h) * head_dim;
    const int a = neox ? j : 2 * j, b = neox ? j + pairs : 2 * j + 1;
    const float c = cs[2 * j], s = cs[2 * j + 1];
    const float x0 = v[a], x1 = v[b];
    v[a] = rope_lo(x0, x1, c, s);
    v[b] = rope_hi(x0, x1, c, s);
  }
}

extern "C" __global__ void swiglu(const float* g, const float* __restrict__ u,
                                  float* out, long long count) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const float gv = g[i];
    out[i] = gv / (1.0f + expf(-gv)) * u[i];
  }
}

// swiglu, and the result quantized (one warp per block of 32; count a multiple of 32).
extern "C" __global__ void swiglu_q8(const float* g, const float* __restrict__ u, float* out,
                                     i8* __restrict__ xq, float2* __restrict__ xds,
                                     long long nblocks, u16* __restrict__ xh) {
  PDL_TRIGGER();
  PDL_WAIT();
  const long long blk = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (blk >= nblocks) return;
  const int lane = threadIdx.x & 31;
  const long long i = blk * 32 + lane;
  const float gv = g[i];
  const float v = gv / (1.0f + expf(-gv)) * u[i];
  out[i] = v;
  q8_block(v, lane, xq, xds, blk, xh);
}

extern "C" __global__ void add(float* acc, const float* __restrict__ x, long long count) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    acc[i] += x[i];
}

// The elementwise ops of the families beyond llama (graph/ops.h), the CPU defaults' arithmetic.
extern "C" __global__ void geglu(const float* g, const float* __restrict__ u, float* out,
                                 long long count) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const float x = g[i];
    out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x))) * u[i];
  }
}

// gpt-oss's clamped SwiGLU (graph/ops.h swiglu_oai), out may be g.
extern "C" __global__ void swiglu_oai(const float* g, const float* __restrict__ u, float* out,
                                      long long count, float alpha, float limit) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const float x = fminf(g[i], limit);
    const float y = fminf(fmaxf(u[i], -limit), limit);
    out[i] = x / (1.0f + expf(alpha * -x)) * (y + 1.0f);
  }
}

// x[t][i] += bias[i]: x [count / dim][dim].
extern "C" __global__ void add_rows(float* x, const float* __restrict__ bias, long long count,
                                    int dim) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    x[i] += bias[i % dim];
}

extern "C" __global__ void scale(float* x, float s, long long count) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    x[i] *= s;
}

extern "C" __global__ void softcap(float* x, float cap, long long count) {
  PDL_TRIGGER();
  PDL_WAIT();
  const float inv = 1.0f / cap;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    x[i] = cap * tanhf(x[i] * inv);
}

// out[t][c] = x[t][first + c]: x [n][x_cols], out [n][cols], count = n * cols.
extern "C" __global__ void copy_cols(const float* __restrict__ x, float* __restrict__ out,
                                     long long count, int x_cols, int first, int cols) {
  PDL_TRIGGER();
  PDL_WAIT();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = x[(i / cols) * x_cols + first + i % cols];
}

// out[r][c] = sum_j coef[r * terms + j] * x[rows[r * terms + j]][c]: one block per output row
// (MoE: each row's experts' outputs weighted and summed). The first term assigns.
extern "C" __global__ void weighted_sum_rows(const float* __restrict__ x, float* __restrict__ out,
                                             const int* __restrict__ rows,
                                             const float* __restrict__ coef, int cols, int terms) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int r = blockIdx.x;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < terms; ++j)
      acc = j == 0 ? coef[r * terms] * x[(size_t)rows[r * terms] * cols + c]
                   : acc + coef[r * terms + j] * x[(size_t)rows[r * terms + j] * cols + c];
    out[(size_t)r * cols + c] = acc;
  }
}

__device__ __forceinline__ void rope_row(float* __restrict__ xr, const float* __restrict__ cs,
                                         int n_heads, int head_dim, int n_rot, int neox) {
  const int pairs = n_rot / 2;
  for (int i = threadIdx.x; i < n_heads * pairs; i += blockDim.x) {
    const int h = i / pairs, j = i % pairs;
    float* v = xr + (size_t)h * head_dim;
    const int a = neox ? j : 2 * j, b = neox ? j + pairs : 2 * j + 1;
    const float c = cs[2 * j], s = cs[2 * j + 1];
    const float x0 = v[a], x1 = v[b];
    v[a] = rope_lo(x0, x1, c, s);
    v[b] = rope_hi(x0, x1, c, s);
  }
}
__device__ __forceinline__ void store_row(const float* __restrict__ s, u8* dst, int dim, int kv_f16) {
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    if (kv_f16) ((u16*)dst)[i] = f2h(s[i]);
    else ((float*)dst)[i] = s[i];
  }
}
// RoPE on q ([n][n_head][hd]) and k ([n][n_head_kv][hd]) in place, then k and v rows stored in
// the KV cache (rows[t] + koff / voff): rope, rope, store_kv, store_kv in one launch, same bits.
extern "C" __global__ void rope_store(float* __restrict__ q, float* __restrict__ k,
                                      const float* __restrict__ v, const float* __restrict__ cache,
                                      int n_head, int n_head_kv, int head_dim, int n_rot, int neox,
                                      const u64* __restrict__ rows, u64 koff, u64 voff, int kv_f16) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int t = blockIdx.x, kv_dim = n_head_kv * head_dim;
  const float* cs = cache + (size_t)t * n_rot;
  float* kr = k + (size_t)t * kv_dim;
  rope_row(q + (size_t)t * n_head * head_dim, cs, n_head, head_dim, n_rot, neox);
  rope_row(kr, cs, n_head_kv, head_dim, n_rot, neox);
  __syncthreads();  // the rotated k row is read by other threads below
  store_row(kr, (u8*)(rows[t] + koff), kv_dim, kv_f16);
  store_row(v + (size_t)t * kv_dim, (u8*)(rows[t] + voff), kv_dim, kv_f16);
}

// Greedy pick per logits row: x [n][cols]; grid (chunks, n), block 256. Each CTA finds the
// (largest value, lowest column) of its chunk into part_v / part_i [n][chunks]; the CTA that
// finishes a row last (count[row], reset to 0 for the next launch) combines the chunks and writes
// ids[row]. Ties go to the lowest column at every level, as the host's std::max_element.
__device__ __forceinline__ void amax_pick(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
}
__device__ __forceinline__ void amax_block(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    amax_pick(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  __shared__ float sv[32];
  __shared__ int si[32];
  const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if ((threadIdx.x & 31) == 0) { sv[w] = v; si[w] = i; }
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < nw ? sv[threadIdx.x] : NEG_INF;
    i = threadIdx.x < nw ? si[threadIdx.x] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      amax_pick(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  }
}
extern "C" __global__ void argmax_rows(const float* __restrict__ x, long long cols,
                                       float* __restrict__ part_v, int* __restrict__ part_i,
                                       unsigned* __restrict__ count, int* __restrict__ ids) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int row = blockIdx.y, nch = gridDim.x;
  const long long per = (cols + nch - 1) / nch;
  const long long c0 = (long long)blockIdx.x * per, c1 = min(cols, c0 + per);
  const float* xr = x + (size_t)row * cols;
  float v = NEG_INF;
  int i = c0 < cols ? (int)c0 : 0x7fffffff;  // an all -inf chunk still names its first column
  for (long long c = c0 + threadIdx.x; c < c1; c += blockDim.x) amax_pick(v, i, xr[c], (int)c);
  amax_block(v, i);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    part_v[(size_t)row * nch + blockIdx.x] = v;
    part_i[(size_t)row * nch + blockIdx.x] = i;
    __threadfence();  // the partial is visible before the count says so
    last = atomicAdd(count + row, 1u) == (unsigned)nch - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  v = NEG_INF;
  i = 0x7fffffff;
  for (int c = threadIdx.x; c < nch; c += blockDim.x)
    amax_pick(v, i, ((volatile float*)part_v)[(size_t)row * nch + c],
              ((volatile int*)part_i)[(size_t)row * nch + c]);
  amax_block(v, i);
  if (threadIdx.x == 0) {
    ids[row] = i;
    count[row] = 0;
  }
}

// Row t of src ([n][dim]) to the KV row at rows[t] + offset, as f16 (kv_f16) or f32.
extern "C" __global__ void store_kv(const float* __restrict__ src, const u64* __restrict__ rows,
                                    u64 offset, int dim, int kv_f16) {
  PDL_TRIGGER();
  PDL_WAIT();
  const float* s = src + (size_t)blockIdx.x * dim;
  u8* dst = (u8*)(rows[blockIdx.x] + offset);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    if (kv_f16) ((u16*)dst)[i] = f2h(s[i]);
    else ((float*)dst)[i] = s[i];
  }
}
)";

// What both attention kernels below start with: head dims per lane, a K or V value, and the end
// of a head (one warp): the 4 warps' softmax states (m at sm[w ss], l at sl[w ss]) and sums (value
// d at sacc[w as + d]) merged, normalized and stored to out, with its q8 copy for the wo matvec;
// then the kernel's signature and opening, which the two bodies below continue.
constexpr const char* kAttentionCommon = R"(
constexpr int E = (HD + 31) / 32;  // head dims per lane
__device__ __forceinline__ float kv_load(const u8* row, int d) {
  return KV_F16 ? h2f(((const u16*)row)[d]) : ((const float*)row)[d];
}
// sink: the head's sink logit (gpt-oss), one more state with l = 1 and no value; NEG_INF: none.
__device__ __forceinline__ void attn_merge_store(const float* sm, const float* sl, const float* sacc, int ss,
                                                 int as, int row, int h, int n_head, int lane,
                                                 float* __restrict__ out, i8* __restrict__ xq,
                                                 float2* __restrict__ xds, u16* __restrict__ xh,
                                                 float sink) {
  float M = sink;
  for (int w = 0; w < 4; ++w) M = fmaxf(M, sm[w * ss]);
  float L = sink == NEG_INF ? 0.0f : expf(sink - M), f[4];
  for (int w = 0; w < 4; ++w) {
    f[w] = sm[w * ss] == NEG_INF ? 0.0f : expf(sm[w * ss] - M);
    L += sl[w * ss] * f[w];
  }
  float* o = out + ((size_t)row * n_head + h) * HD;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const int d = lane + 32 * i;
    float v = 0.0f;
    if (d < HD) {
      for (int w = 0; w < 4; ++w) v += sacc[w * as + d] * f[w];
      v = L > 0.0f ? v / L : 0.0f;
      o[d] = v;
    }
#if HD % 32 == 0
    // Quantized as quantize_q8 over the row would: blocks of 32 never straddle heads when HD is a
    // multiple of 32.
    if (xq) q8_block(v, lane, xq, xds, (((long long)row * n_head + h) * HD + 32 * i) / 32, xh);
#endif
  }
}

extern "C" __global__ void __launch_bounds__(128)
attention(const float* __restrict__ q, float* __restrict__ out, const u64* __restrict__ pages,
          const int* __restrict__ row_pt, const int* __restrict__ n_kv, u64 koff, u64 voff,
          int page_tokens, int row_bytes, int n_head, int group, float scale,
          i8* __restrict__ xq, float2* __restrict__ xds, u16* __restrict__ xh, int window,
          float softcap, const float* __restrict__ sinks) {
  PDL_TRIGGER();
  PDL_WAIT();
)";

// One CTA per (query row, head); 4 warps split the keys, each warp one key at a time (lanes
// split the head dimension), with an online softmax; the warps' partial states are merged at
// the end. Keys of position p: pages[row_pt[row] + p / PT] + koff + (p % PT) * row_bytes.
// KPS > 1: each warp takes KPS consecutive keys per step, their K and V loads issued together
// and their warp sums interleaved (one memory latency per KPS keys instead of per key), the
// online softmax rescaled once per step; the sums run in another order than KPS = 1's.
constexpr const char* kAttention = R"(  const int row = blockIdx.x, h = blockIdx.y, hk = h / group;
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
  const int nk = n_kv[row];
  const int k0 = window > 0 ? max(0, nk - window) : 0;  // a sliding window's first key
  float m = NEG_INF, l = 0.0f;
#if KPS > 1
  for (int p0 = k0 + warp * KPS; p0 < nk; p0 += 4 * KPS) {
    float s[KPS], vv[KPS][E];
#pragma unroll
    for (int u = 0; u < KPS; ++u) {
      const int p = min(p0 + u, nk - 1);  // past the end: a valid key, its weight dropped below
      const u8* base = (const u8*)pt[p / page_tokens] + (size_t)(p % page_tokens) * row_bytes +
                       (size_t)hk * HD * (KV_F16 ? 2 : 4);
      s[u] = 0.0f;
#pragma unroll
      for (int i = 0; i < E; ++i) {
        const int d = lane + 32 * i;
        if (d < HD) s[u] += qv[i] * kv_load(base + koff, d);
        vv[u][i] = d < HD ? kv_load(base + voff, d) : 0.0f;
      }
    }
    // (A clamped slot repeats key nk - 1's score, which is in this step: the max is unchanged.)
    float mn = m;
#pragma unroll
    for (int u = 0; u < KPS; ++u) {
      s[u] = warp_sum(s[u]) * scale;
      if (softcap > 0.0f) s[u] = softcap * tanhf(s[u] / softcap);
      mn = fmaxf(mn, s[u]);
    }
    const float corr = expf(m - mn);
    l *= corr;
#pragma unroll
    for (int i = 0; i < E; ++i) acc[i] *= corr;
#pragma unroll
    for (int u = 0; u < KPS; ++u) {
      const float e = p0 + u < nk ? expf(s[u] - mn) : 0.0f;
      l += e;
#pragma unroll
      for (int i = 0; i < E; ++i) acc[i] += e * vv[u][i];
    }
    m = mn;
  }
#else
  for (int p = k0 + warp; p < nk; p += 4) {
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
#endif
  __shared__ float sm[4], sl[4], sacc[4][E * 32];
  if (lane == 0) { sm[warp] = m; sl[warp] = l; }
#pragma unroll
  for (int i = 0; i < E; ++i) sacc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  attn_merge_store(sm, sl, &sacc[0][0], 1, E * 32, row, h, n_head, lane, out, xq, xds, xh,
                   sinks ? sinks[h] : NEG_INF);
}
)";

}  // namespace

const char* weight_kind_name(WeightKind kind) {
  switch (kind) {
    case WeightKind::F32: return "f32";
    case WeightKind::F16: return "f16";
    case WeightKind::BF16: return "bf16";
    case WeightKind::Q8_0: return "q8_0";
    case WeightKind::Q4_K: return "q4_k";
    case WeightKind::Q6_K: return "q6_k";
    default: return format_kind_name(kind);
  }
  return "?";
}

bool uses_q8_activation(WeightKind kind) {
  return kind == WeightKind::Q8_0 || kind == WeightKind::Q4_K || kind == WeightKind::Q6_K ||
         is_format_kind(kind);
}

SegmentKinds segment_kinds(const WeightKind* kinds, int nseg, int64_t k,
                           bool (*supports)(WeightKind, int64_t), const char* what, const char* rule) {
  SegmentKinds r;
  for (int i = 0; i < nseg; ++i) {
    const WeightKind kind = kinds[i];
    if (!supports(kind, k))
      throw_error("{}: no kernel for {} rows of length {} ({})", what, weight_kind_name(kind), k, rule);
    const int id = kind == WeightKind::Q8_0 ? 3 : kind == WeightKind::Q4_K ? 4 : 5;
    r.defs += fmt::format("#define KIND{} {}\n", i, id);
    r.q4k |= kind == WeightKind::Q4_K;
    r.q6k |= kind == WeightKind::Q6_K;
    r.q80 |= kind == WeightKind::Q8_0;
  }
  return r;
}

const char* kernel_prelude() { return kPrelude; }

std::string elementwise_source() { return std::string(kPrelude) + kElementwise; }

std::string attention_source(int head_dim, bool kv_f16, int keys_per_step) {
  if (head_dim <= 0 || head_dim > 512)
    throw_error("attention: head size {} is not in [1, 512]", head_dim);
  if (keys_per_step != 1 && keys_per_step != 2 && keys_per_step != 4 && keys_per_step != 8)
    throw_error("attention: {} keys per warp step is not 1, 2, 4 or 8", keys_per_step);
  // (GQ: read by no kernel since the CTA per group of query heads was removed; kept so every
  // source and its cache key stay as they were.)
  return fmt::format("#define HD {}\n#define KV_F16 {}\n#define KPS {}\n#define GQ 1\n", head_dim,
                     kv_f16 ? 1 : 0, keys_per_step) +
         kPrelude + kAttentionCommon + kAttention;
}

}  // namespace jitllm::cuda
