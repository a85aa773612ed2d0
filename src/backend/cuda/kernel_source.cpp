// CUDA C++ text for the generated kernels (see kernel_source.h for the launch conventions).
// The sources include no headers: half conversion and dp4a are inline PTX, so NVRTC needs no
// toolkit include directory at run time.
#include "backend/cuda/kernel_source.h"

#include <fmt/format.h>

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
__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
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
)";

// Shared head of every matvec: the row this warp owns, NT accumulators, and the epilogue macro
// that reduces them across the warp and stores the columns that exist.
constexpr const char* kMatvecHead = R"(
extern "C" __global__ void __launch_bounds__(128)
matvec(const u8* __restrict__ w, const u8* __restrict__ w2, const i8* __restrict__ xq,
       const float2* __restrict__ xds, const float* __restrict__ xf, float* __restrict__ out,
       int rows, int n) {
  const int r = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const int c0 = blockIdx.y * NT;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
)";

constexpr const char* kMatvecTail = R"(
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0 && c0 + t < n) out[(size_t)(c0 + t) * rows + r] = s;
  }
}
)";

// Q4_K (GGUF block of 256: half d, half dmin, 12 bytes of 6-bit scales/mins, 128 bytes of
// nibbles). Four lanes per block, lane sub-index p owns qs[32p, 32p+32): its low nibbles are
// sub-block 2p, its high nibbles sub-block 2p+1. Activation: int8 blocks of 32 with (d, d*sum).
constexpr const char* kQ4K = R"(
  constexpr int NB = K / 256;
  const u8* wr = w + (size_t)r * (NB * 144);
  const int p = lane & 3;
#pragma unroll
  for (int b = lane >> 2; b < NB; b += 8) {
    const u8* blk = wr + b * 144;
    const uint4 hd = *(const uint4*)blk;  // d, dmin, scales[0..11]
    const float d = h2f((u16)(hd.x & 0xffff)), dmin = h2f((u16)(hd.x >> 16));
    const u32 s0 = hd.y, s1 = hd.z, s2 = hd.w;
    const int ja = 2 * p, jb = 2 * p + 1;
    // get_scale_min_k4 for j = 2p and 2p + 1
    float sca, ma, scb, mb;
    if (p < 2) {
      sca = (float)((s0 >> (8 * ja)) & 63); ma = (float)((s1 >> (8 * ja)) & 63);
      scb = (float)((s0 >> (8 * jb)) & 63); mb = (float)((s1 >> (8 * jb)) & 63);
    } else {
      const int ia = ja - 4, ib = jb - 4;
      sca = (float)(((s2 >> (8 * ia)) & 0xF) | (((s0 >> (8 * ia + 6)) & 3) << 4));
      ma = (float)(((s2 >> (8 * ia + 4)) & 0xF) | (((s1 >> (8 * ia + 6)) & 3) << 4));
      scb = (float)(((s2 >> (8 * ib)) & 0xF) | (((s0 >> (8 * ib + 6)) & 3) << 4));
      mb = (float)(((s2 >> (8 * ib + 4)) & 0xF) | (((s1 >> (8 * ib + 6)) & 3) << 4));
    }
    const uint4* qp = (const uint4*)(blk + 16 + 32 * p);
    const uint4 qa = qp[0], qb = qp[1];
    const u32 q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int4* xp = (const int4*)(xq + (size_t)(c0 + t) * K + b * 256 + 64 * p);
      const int4 x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3];
      const int xa[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      const int xb[8] = {x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
      int da = 0, db = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        da = dp4a((int)(q[i] & 0x0F0F0F0Fu), xa[i], da);
        db = dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), xb[i], db);
      }
      const float2* ds = xds + (size_t)(c0 + t) * (K / 32) + b * 8 + 2 * p;
      const float2 fa = ds[0], fb = ds[1];
      acc[t] += d * (sca * fa.x * (float)da + scb * fb.x * (float)db) - dmin * (ma * fa.y + mb * fb.y);
    }
  }
)";

// Q6_K repacked per block as [ql 128][qh 64][scales 16] (208 bytes, 16-byte aligned), the half
// d of every block in w2 [rows][NB]. Lane sub-index s: half h = s / 2 of the block, positions
// l in [l0, l0 + 16) with l0 = 16 (s % 2); it owns weights l, l+32, l+64, l+96 of that half.
constexpr const char* kQ6K = R"(
  constexpr int NB = K / 256;
  const u8* wr = w + (size_t)r * (NB * 208);
  const u16* dr = (const u16*)w2 + (size_t)r * NB;
  const int s = lane & 3, h = s >> 1, l0 = (s & 1) * 16;
#pragma unroll
  for (int b = lane >> 2; b < NB; b += 8) {
    const u8* blk = wr + b * 208;
    const uint4 A = *(const uint4*)(blk + h * 64 + l0);
    const uint4 B = *(const uint4*)(blk + h * 64 + 32 + l0);
    const uint4 H = *(const uint4*)(blk + 128 + h * 32 + l0);
    const uint2 S = *(const uint2*)(blk + 192 + h * 8);
    const float d = h2f(dr[b]);
    const int sh = 8 * (l0 >> 4);
    const float sc[4] = {(float)(i8)(S.x >> sh), (float)(i8)(S.x >> (sh + 16)),
                         (float)(i8)(S.y >> sh), (float)(i8)(S.y >> (sh + 16))};
    const u32 a[4] = {A.x, A.y, A.z, A.w}, bb[4] = {B.x, B.y, B.z, B.w}, hh[4] = {H.x, H.y, H.z, H.w};
    u32 q[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      q[0][i] = (a[i] & 0x0F0F0F0Fu) | ((hh[i] << 4) & 0x30303030u);
      q[1][i] = (bb[i] & 0x0F0F0F0Fu) | ((hh[i] << 2) & 0x30303030u);
      q[2][i] = ((a[i] >> 4) & 0x0F0F0F0Fu) | (hh[i] & 0x30303030u);
      q[3][i] = ((bb[i] >> 4) & 0x0F0F0F0Fu) | ((hh[i] >> 2) & 0x30303030u);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const i8* xr = xq + (size_t)(c0 + t) * K + b * 256 + h * 128 + l0;
      const float2* ds = xds + (size_t)(c0 + t) * (K / 32) + b * 8 + h * 4;
      float part = 0.0f;
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const int4 x = *(const int4*)(xr + 32 * g);
        const int xv[4] = {x.x, x.y, x.z, x.w};
        int dot = 0, sx = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          dot = dp4a((int)q[g][i], xv[i], dot);
          sx = dp4a(0x01010101, xv[i], sx);
        }
        part += sc[g] * ds[g].x * (float)(dot - 32 * sx);
      }
      acc[t] += d * part;
    }
  }
)";

// Q8_0 repacked: int8 [rows][K] and the half d of each block of 32 in w2 [rows][K / 32]. One
// block of 32 per lane per step.
constexpr const char* kQ80 = R"(
  constexpr int NB = K / 32;
  const i8* wr = (const i8*)w + (size_t)r * K;
  const u16* dr = (const u16*)w2 + (size_t)r * NB;
#pragma unroll
  for (int b = lane; b < NB; b += 32) {
    const int4* qp = (const int4*)(wr + b * 32);
    const int4 q0 = qp[0], q1 = qp[1];
    const int q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    const float d = h2f(dr[b]);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int4* xp = (const int4*)(xq + (size_t)(c0 + t) * K + b * 32);
      const int4 x0 = xp[0], x1 = xp[1];
      const int x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      int dot = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) dot = dp4a(q[i], x[i], dot);
      acc[t] += d * xds[(size_t)(c0 + t) * NB + b].x * (float)dot;
    }
  }
)";

// 16-bit floats (F16 or BF16 via CVT): 8 values per lane per step with 16-byte loads when the
// row length allows it, a scalar tail otherwise. The activation stays f32.
constexpr const char* kHalf = R"(
  const u16* wr = (const u16*)w + (size_t)r * K;
  constexpr int KV = VEC ? (K / 256) * 256 : 0;
#pragma unroll 4
  for (int e = lane * 8; e < KV; e += 256) {
    const uint4 wv = *(const uint4*)(wr + e);
    const u32 wp[4] = {wv.x, wv.y, wv.z, wv.w};
    float wf[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) { wf[2 * i] = CVT((u16)(wp[i] & 0xffff)); wf[2 * i + 1] = CVT((u16)(wp[i] >> 16)); }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float4* xp = (const float4*)(xf + (size_t)(c0 + t) * K + e);
      const float4 a = xp[0], bq = xp[1];
      acc[t] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * bq.x + wf[5] * bq.y + wf[6] * bq.z + wf[7] * bq.w;
    }
  }
  for (int e = KV + lane; e < K; e += 32) {
    const float wv = CVT(wr[e]);
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] += wv * xf[(size_t)(c0 + t) * K + e];
  }
)";

constexpr const char* kF32 = R"(
  const float* wr = (const float*)w + (size_t)r * K;
  constexpr int KV = VEC ? (K / 128) * 128 : 0;
#pragma unroll 4
  for (int e = lane * 4; e < KV; e += 128) {
    const float4 wv = *(const float4*)(wr + e);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float4 a = *(const float4*)(xf + (size_t)(c0 + t) * K + e);
      acc[t] += wv.x * a.x + wv.y * a.y + wv.z * a.z + wv.w * a.w;
    }
  }
  for (int e = KV + lane; e < K; e += 32) {
    const float wv = wr[e];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] += wv * xf[(size_t)(c0 + t) * K + e];
  }
)";

constexpr const char* kElementwise = R"(
// One warp per block of 32 values: int8 values and (d, d * sum of the int8 values), as
// llama.cpp's q8_1. xq: [n][k], xds: [n][k / 32].
extern "C" __global__ void quantize_q8(const float* __restrict__ x, i8* __restrict__ xq,
                                       float2* __restrict__ xds, long long nblocks) {
  const long long blk = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (blk >= nblocks) return;
  const int lane = threadIdx.x & 31;
  const float v = x[blk * 32 + lane];
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const int q = amax == 0.0f ? 0 : __float2int_rn(v / d);
  xq[blk * 32 + lane] = (i8)q;
  const float sum = warp_sum((float)q);
  if (lane == 0) xds[blk] = make_float2(d, d * sum);
}

// x, out: [n][dim]; the sum of squares in double as the CPU reference does.
extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ out, int dim, float eps) {
  const float* xr = x + (size_t)blockIdx.x * dim;
  float* yr = out + (size_t)blockIdx.x * dim;
  double s = 0.0;
  for (int i = threadIdx.x; i < dim; i += 256) s += (double)(xr[i] * xr[i]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __shared__ double part[8];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  double total = 0.0;
  for (int i = 0; i < 8; ++i) total += part[i];
  const float mean = (float)(total / (double)dim);
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int i = threadIdx.x; i < dim; i += 256) yr[i] = xr[i] * scale * w[i];
}

// In place on x: [n][n_heads][head_dim]; cache: [n][n_rot] (cos, sin) pairs made on the host.
extern "C" __global__ void rope(float* __restrict__ x, const float* __restrict__ cache,
                                int n_heads, int head_dim, int n_rot, int neox) {
  const int t = blockIdx.x;
  const int pairs = n_rot / 2;
  const float* cs = cache + (size_t)t * n_rot;
  for (int i = threadIdx.x; i < n_heads * pairs; i += blockDim.x) {
    const int h = i / pairs, j = i % pairs;
    float* v = x + ((size_t)t * n_heads + h) * head_dim;
    const int a = neox ? j : 2 * j, b = neox ? j + pairs : 2 * j + 1;
    const float c = cs[2 * j], s = cs[2 * j + 1];
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

extern "C" __global__ void swiglu(const float* g, const float* __restrict__ u,
                                  float* out, long long count) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const float gv = g[i];
    out[i] = gv / (1.0f + expf(-gv)) * u[i];
  }
}

extern "C" __global__ void add(float* acc, const float* __restrict__ x, long long count) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    acc[i] += x[i];
}

// Row t of src ([n][dim]) to the KV row at rows[t] + offset, as f16 (kv_f16) or f32.
extern "C" __global__ void store_kv(const float* __restrict__ src, const u64* __restrict__ rows,
                                    u64 offset, int dim, int kv_f16) {
  const float* s = src + (size_t)blockIdx.x * dim;
  u8* dst = (u8*)(rows[blockIdx.x] + offset);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    if (kv_f16) ((u16*)dst)[i] = f2h(s[i]);
    else ((float*)dst)[i] = s[i];
  }
}
)";

// One CTA per (query row, head); 4 warps split the keys, each warp one key at a time (lanes
// split the head dimension), with an online softmax; the warps' partial states are merged at
// the end. Keys of position p: pages[row_pt[row] + p / PT] + koff + (p % PT) * row_bytes.
constexpr const char* kAttention = R"(
constexpr int E = (HD + 31) / 32;  // head dims per lane
__device__ __forceinline__ float kv_load(const u8* row, int d) {
  return KV_F16 ? h2f(((const u16*)row)[d]) : ((const float*)row)[d];
}
extern "C" __global__ void __launch_bounds__(128)
attention(const float* __restrict__ q, float* __restrict__ out, const u64* __restrict__ pages,
          const int* __restrict__ row_pt, const int* __restrict__ n_kv, u64 koff, u64 voff,
          int page_tokens, int row_bytes, int n_head, int group, float scale) {
  const int row = blockIdx.x, h = blockIdx.y, hk = h / group;
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
  float m = NEG_INF, l = 0.0f;
  for (int p = warp; p < nk; p += 4) {
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
  float* o = out + ((size_t)row * n_head + h) * HD;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const int d = lane + 32 * i;
    if (d >= HD) continue;
    float v = 0.0f;
    for (int w = 0; w < 4; ++w) v += sacc[w][d] * f[w];
    o[d] = L > 0.0f ? v / L : 0.0f;
  }
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
  }
  return "?";
}

bool uses_q8_activation(WeightKind kind) {
  return kind == WeightKind::Q8_0 || kind == WeightKind::Q4_K || kind == WeightKind::Q6_K;
}

std::string matvec_source(WeightKind kind, int64_t k, int nt) {
  if (nt < 1 || nt > 16) throw_error("matvec: tile of {} activation rows is not in [1, 16]", nt);
  const char* body = nullptr;
  int64_t multiple = 1;
  std::string defs = fmt::format("#define K {}\n#define NT {}\n", k, nt);
  switch (kind) {
    case WeightKind::Q4_K: body = kQ4K; multiple = 256; break;
    case WeightKind::Q6_K: body = kQ6K; multiple = 256; break;
    case WeightKind::Q8_0: body = kQ80; multiple = 32; break;
    case WeightKind::F16:
      body = kHalf;
      defs += fmt::format("#define VEC {}\n#define CVT h2f\n", k % 8 == 0 ? 1 : 0);
      break;
    case WeightKind::BF16:
      body = kHalf;
      defs += fmt::format("#define VEC {}\n#define CVT bf2f\n", k % 8 == 0 ? 1 : 0);
      break;
    case WeightKind::F32:
      body = kF32;
      defs += fmt::format("#define VEC {}\n", k % 4 == 0 ? 1 : 0);
      break;
  }
  if (k <= 0 || k % multiple != 0)
    throw_error("matvec {}: row length {} is not a positive multiple of {}",
                weight_kind_name(kind), k, multiple);
  return defs + kPrelude + kMatvecHead + body + kMatvecTail;
}

std::string elementwise_source() { return std::string(kPrelude) + kElementwise; }

std::string attention_source(int head_dim, bool kv_f16) {
  if (head_dim <= 0 || head_dim > 512)
    throw_error("attention: head size {} is not in [1, 512]", head_dim);
  return fmt::format("#define HD {}\n#define KV_F16 {}\n", head_dim, kv_f16 ? 1 : 0) + kPrelude +
         kAttention;
}

}  // namespace jitllm::cuda
