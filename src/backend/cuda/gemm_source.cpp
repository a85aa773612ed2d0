// CUDA C++ text of the prefill GEMM's helper kernels (gemm.h): weight dequantization of the
// packed layouts (packed_weight.h) to f16, and activation conversion to f16 / bf16.
#include "backend/cuda/gemm.h"
#include "backend/cuda/weight_formats.h"

namespace jitllm::cuda {

namespace {

constexpr const char* kGemmKernels = R"(
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef signed char i8;
__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16 f2bf(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u32 pack2(float a, float b) { return (u32)f2h(a) | ((u32)f2h(b) << 16); }

// Q4_K as stored in GGUF: 144-byte blocks {half d, half dmin, u8 scales[12], u8 qs[128]} of 256
// values. One warp per block: lane = 8 * pair + c; pair i holds sub-blocks 2i (low nibbles) and
// 2i+1 (high nibbles) of qs[32i .. 32i+31]; lane c takes bytes 4c..4c+3 of it.
extern "C" __global__ void __launch_bounds__(256)
dequant_q4_k(const u8* __restrict__ w, u16* __restrict__ out, long long nblocks) {
  const int lane = threadIdx.x & 31, i = lane >> 3, c = lane & 7;
  for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; b < nblocks;
       b += ((long long)gridDim.x * blockDim.x) >> 5) {
    const u8* blk = w + b * 144;
    const float d = h2f(*(const u16*)blk), dmin = h2f(*(const u16*)(blk + 2));
    const u8* sc = blk + 4;
    int s0, m0, s1, m1;  // scale and min of sub-blocks j0 = 2i and j1 = 2i + 1
    const int j0 = 2 * i, j1 = 2 * i + 1;
    if (j0 < 4) { s0 = sc[j0] & 63; m0 = sc[j0 + 4] & 63; }
    else { s0 = (sc[j0 + 4] & 0xF) | ((sc[j0 - 4] >> 6) << 4); m0 = (sc[j0 + 4] >> 4) | ((sc[j0] >> 6) << 4); }
    if (j1 < 4) { s1 = sc[j1] & 63; m1 = sc[j1 + 4] & 63; }
    else { s1 = (sc[j1 + 4] & 0xF) | ((sc[j1 - 4] >> 6) << 4); m1 = (sc[j1 + 4] >> 4) | ((sc[j1] >> 6) << 4); }
    const float d0 = d * s0, n0 = dmin * m0, d1 = d * s1, n1 = dmin * m1;
    const u32 q = *(const u32*)(blk + 16 + 32 * i + 4 * c);
    uint2 lo, hi;
    lo.x = pack2(d0 * (q & 0xF) - n0, d0 * ((q >> 8) & 0xF) - n0);
    lo.y = pack2(d0 * ((q >> 16) & 0xF) - n0, d0 * ((q >> 24) & 0xF) - n0);
    hi.x = pack2(d1 * ((q >> 4) & 0xF) - n1, d1 * ((q >> 12) & 0xF) - n1);
    hi.y = pack2(d1 * ((q >> 20) & 0xF) - n1, d1 * ((q >> 28) & 0xF) - n1);
    u16* o = out + b * 256 + 64 * i + 4 * c;
    *(uint2*)o = lo;
    *(uint2*)(o + 32) = hi;
  }
}

// Q6_K repacked: 208-byte blocks {u8 ql[128], u8 qh[64], i8 scales[16]} and the half d's apart.
// One warp per block; lane l makes values l, l+32, l+64, l+96 of each 128-value half.
extern "C" __global__ void __launch_bounds__(256)
dequant_q6_k(const u8* __restrict__ w, const u16* __restrict__ dd, u16* __restrict__ out,
             long long nblocks) {
  const int l = threadIdx.x & 31, is = l / 16;
  for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; b < nblocks;
       b += ((long long)gridDim.x * blockDim.x) >> 5) {
    const u8* blk = w + b * 208;
    const float d = h2f(dd[b]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u8* ql = blk + 64 * h;
      const u8 qh = blk[128 + 32 * h + l];
      const i8* sc = (const i8*)(blk + 192 + 8 * h);
      const u8 a = ql[l], c = ql[l + 32];
      const int q1 = (int)((a & 0xF) | ((qh & 3) << 4)) - 32;
      const int q2 = (int)((c & 0xF) | (((qh >> 2) & 3) << 4)) - 32;
      const int q3 = (int)((a >> 4) | (((qh >> 4) & 3) << 4)) - 32;
      const int q4 = (int)((c >> 4) | (((qh >> 6) & 3) << 4)) - 32;
      u16* o = out + b * 256 + 128 * h + l;
      o[0] = f2h(d * sc[is] * q1);
      o[32] = f2h(d * sc[is + 2] * q2);
      o[64] = f2h(d * sc[is + 4] * q3);
      o[96] = f2h(d * sc[is + 6] * q4);
    }
  }
}

// Q8_0 repacked: int8 values [rows][k] and the half scales [rows][k / 32] apart. One thread per 4
// values (n4 = values / 4).
extern "C" __global__ void __launch_bounds__(256)
dequant_q8_0(const i8* __restrict__ w, const u16* __restrict__ dd, u16* __restrict__ out,
             long long n4) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
       i += (long long)gridDim.x * blockDim.x) {
    const char4 q = ((const char4*)w)[i];
    const float d = h2f(dd[i >> 3]);
    uint2 v;
    v.x = pack2(d * q.x, d * q.y);
    v.y = pack2(d * q.z, d * q.w);
    ((uint2*)out)[i] = v;
  }
}

// Embedding rows for prefill: out[t][0..k) = table row ids[t] in f32, bit-equal to the CPU
// reference's dequantize_row (same f32 operations in the same order; the _rn intrinsics keep
// NVRTC from contracting them into FMAs). One CTA per row. kind: 0 F32, 1 F16, 2 BF16, 3 Q8_0
// (repacked), 4 Q4_K, 5 Q6_K (repacked); w2: the separate scales of Q8_0 / Q6_K.
__device__ __forceinline__ int k4_scale(const u8* sc, int j) {
  return j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
}
__device__ __forceinline__ int k4_min(const u8* sc, int j) {
  return j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
}
extern "C" __global__ void __launch_bounds__(256)
embed_rows(const u8* __restrict__ w, const u8* __restrict__ w2, const int* __restrict__ ids,
           float* __restrict__ out, int k, int kind) {
  const long long id = ids[blockIdx.x];
  float* o = out + (size_t)blockIdx.x * k;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    const long long e = id * k + i;  // element index in the whole table
    float y;
    if (kind == 0) {
      y = ((const float*)w)[e];
    } else if (kind == 1) {
      y = h2f(((const u16*)w)[e]);
    } else if (kind == 2) {
      y = __uint_as_float(((u32)((const u16*)w)[e]) << 16);
    } else if (kind == 3) {
      y = __fmul_rn((float)((const i8*)w)[e], h2f(((const u16*)w2)[e >> 5]));
    } else if (kind == 4) {
      const u8* blk = w + (e >> 8) * 144;
      const int j = (int)(e & 255), chunk = j >> 6, sub = (j >> 5) & 1, l = j & 31, is = 2 * chunk + sub;
      const float d1 = __fmul_rn(h2f(*(const u16*)blk), (float)k4_scale(blk + 4, is));
      const float m1 = __fmul_rn(h2f(*(const u16*)(blk + 2)), (float)k4_min(blk + 4, is));
      const u8 q = blk[16 + 32 * chunk + l];
      y = __fsub_rn(__fmul_rn(d1, (float)(sub ? q >> 4 : q & 0xF)), m1);
    } else {
      const long long b = e >> 8;
      const u8* blk = w + b * 208;
      const int j = (int)(e & 255), h = j >> 7, qd = (j >> 5) & 3, l = j & 31;
      const u8* ql = blk + 64 * h;
      const u8 qh = blk[128 + 32 * h + l];
      const int lo = (qd & 1) ? ql[l + 32] : ql[l];
      const int q = (((qd & 2) ? lo >> 4 : lo & 0xF) | (((qh >> (2 * qd)) & 3) << 4)) - 32;
      const float sc = (float)((const signed char*)(blk + 192 + 8 * h))[l / 16 + 2 * qd];
      y = __fmul_rn(__fmul_rn(h2f(((const u16*)w2)[b]), sc), (float)q);
    }
    o[i] = y;
  }
}

extern "C" __global__ void __launch_bounds__(256)
to_f16(const float* __restrict__ x, u16* __restrict__ out, long long count) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = f2h(x[i]);
}

extern "C" __global__ void __launch_bounds__(256)
to_bf16(const float* __restrict__ x, u16* __restrict__ out, long long count) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = f2bf(x[i]);
}
)";

}  // namespace

// The block formats of weight_formats.h bring their own dequant_fmt / embed_fmt kernels.
std::string gemm_source() { return std::string(kGemmKernels) + format_dequant_source(); }

}  // namespace jitllm::cuda
