// CUDA C++ text of the dequantization kernels of the block formats of weight_formats.h (card
// layouts documented there): dequant_fmt (weight slice -> f16 for the prefill GEMM) and embed_fmt
// (embedding rows -> f32). Both go through fmt_deq8, which makes 8 consecutive values of a row
// with the same f32 operations in the same order as the CPU reference's dequantize_row (the _rn
// intrinsics keep NVRTC from contracting a multiply and an add into one FMA), so the f32 values
// are bit-equal and the f16 ones are f32_to_fp16 of them (cvt.rn, round to nearest even).
#include <fmt/format.h>

#include "backend/cuda/weight_formats.h"
#include "quant/formats.h"

namespace jitllm::cuda {

namespace {

constexpr const char* kDequant = R"(
__device__ __forceinline__ float fmt_e8m0_half(u32 e) {
  return __uint_as_float(e < 2 ? (0x00200000u << e) : (e - 1) << 23);
}
__device__ __forceinline__ int fmt_k4_scale(const u8* sc, int j) {
  return j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
}
__device__ __forceinline__ int fmt_k4_min(const u8* sc, int j) {
  return j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
}
// Values e0 .. e0 + 7 (e0 a multiple of 8) of row `row` (k values) into y. kind: KIND id of
// weight_formats.h (6 Q4_0, 7 Q4_1, 8 Q5_0, 9 Q5_1, 10 Q5_K, 11 Q3_K, 12 Q2_K, 13 IQ4_NL,
// 14 MXFP4); w: main plane, w2: aux plane.
__device__ __forceinline__ void fmt_deq8(int kind, const u8* __restrict__ w,
                                         const u8* __restrict__ w2, long long row, int k, int e0,
                                         float (&y)[8]) {
  if (kind == 10 || kind == 11 || kind == 12) {
    const long long bi = row * (k >> 8) + (e0 >> 8);
    const int j = e0 & 255;
    if (kind == 10) {  // Q5_K as stored
      const u8* blk = w + bi * 176;
      const int c = j >> 6, sub = (j >> 5) & 1, is = 2 * c + sub, l = j & 31;
      const float d1 = __fmul_rn(h2f(*(const u16*)blk), (float)fmt_k4_scale(blk + 4, is));
      const float m1 = __fmul_rn(h2f(*(const u16*)(blk + 2)), (float)fmt_k4_min(blk + 4, is));
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int qb = blk[48 + 32 * c + l + i];
        const int q = (sub ? qb >> 4 : qb & 0xF) + (((blk[16 + l + i] >> is) & 1) ? 16 : 0);
        y[i] = __fsub_rn(__fmul_rn(d1, (float)q), m1);
      }
    } else {  // Q3_K / Q2_K repacked: [qs 64][hmask 32][scales 16] | d, [qs 64][scales 16] | (d, dmin)
      const int h = j >> 7, g = (j >> 5) & 3, l = j & 31;
      const int is = 8 * h + 2 * g + (l >> 4);
      if (kind == 11) {
        const u8* blk = w + bi * 112;
        const float dl = __fmul_rn(h2f(((const u16*)w2)[bi]), (float)(i8)blk[96 + is]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int q = (blk[32 * h + l + i] >> (2 * g)) & 3;
          const int hb = (blk[64 + l + i] >> (4 * h + g)) & 1;
          y[i] = __fmul_rn(dl, (float)(q - (hb ? 0 : 4)));
        }
      } else {
        const u8* blk = w + bi * 80;
        const u8 sc = blk[64 + is];
        const float dl = __fmul_rn(h2f(((const u16*)w2)[2 * bi]), (float)(sc & 0xF));
        const float ml = __fmul_rn(h2f(((const u16*)w2)[2 * bi + 1]), (float)(sc >> 4));
#pragma unroll
        for (int i = 0; i < 8; ++i)
          y[i] = __fsub_rn(__fmul_rn(dl, (float)((blk[32 * h + l + i] >> (2 * g)) & 3)), ml);
      }
    }
    return;
  }
  // Blocks of 32: qs[16] per block; element j in the low nibble of qs[j], j + 16 in the high one.
  const long long bi = row * (k >> 5) + (e0 >> 5);
  const int j0 = e0 & 31;
  const u8* qs = w + bi * 16;
  int q[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int jj = j0 + i;
    q[i] = jj < 16 ? qs[jj] & 0xF : qs[jj - 16] >> 4;
  }
  if (kind == 8 || kind == 9) {  // aux (u32 qh, half d, half m)
    const u8* a = w2 + bi * 8;
    const u32 qh = *(const u32*)a;
    const float d = h2f(*(const u16*)(a + 4)), m = h2f(*(const u16*)(a + 6));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q5 = q[i] | (int)(((qh >> (j0 + i)) & 1) << 4);
      y[i] = kind == 8 ? __fmul_rn((float)(q5 - 16), d) : __fadd_rn(__fmul_rn((float)q5, d), m);
    }
  } else if (kind == 7) {  // aux (half d, half m)
    const float d = h2f(((const u16*)w2)[2 * bi]), m = h2f(((const u16*)w2)[2 * bi + 1]);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[i] = __fadd_rn(__fmul_rn((float)q[i], d), m);
  } else if (kind == 14) {  // aux u8 e
    const float d = fmt_e8m0_half(w2[bi]);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[i] = __fmul_rn((float)fmt_mxfp4[q[i]], d);
  } else {  // aux half d: Q4_0, IQ4_NL
    const float d = h2f(((const u16*)w2)[bi]);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      y[i] = kind == 6 ? __fmul_rn((float)(q[i] - 8), d) : __fmul_rn(d, (float)fmt_iq4nl[q[i]]);
  }
}

// Rows [row0, row0 + rows) -> f16 [rows][k]; one thread per 8 values (one 16-byte store).
extern "C" __global__ void __launch_bounds__(256)
dequant_fmt(const u8* __restrict__ w, const u8* __restrict__ w2, u16* __restrict__ out,
            long long row0, long long rows, int k, int kind) {
  const int g8 = k >> 3;
  const long long n = rows * g8;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / g8;
    float y[8];
    fmt_deq8(kind, w, w2, row0 + r, k, (int)(i - r * g8) * 8, y);
    uint4 v;
    v.x = pack2(y[0], y[1]); v.y = pack2(y[2], y[3]); v.z = pack2(y[4], y[5]); v.w = pack2(y[6], y[7]);
    ((uint4*)out)[i] = v;
  }
}

// out[t][0..k) = row ids[t] in f32; one CTA per row.
extern "C" __global__ void __launch_bounds__(256)
embed_fmt(const u8* __restrict__ w, const u8* __restrict__ w2, const int* __restrict__ ids,
          float* __restrict__ out, int k, int kind) {
  const long long id = ids[blockIdx.x];
  float* o = out + (size_t)blockIdx.x * k;
  for (int e0 = threadIdx.x * 8; e0 < k; e0 += blockDim.x * 8) {
    float y[8];
    fmt_deq8(kind, w, w2, id, k, e0, y);
    *(float4*)(o + e0) = make_float4(y[0], y[1], y[2], y[3]);
    *(float4*)(o + e0 + 4) = make_float4(y[4], y[5], y[6], y[7]);
  }
}
)";

std::string table(const char* name, const int8_t* t) {
  std::string s = fmt::format("__constant__ signed char {}[16] = {{", name);
  for (int i = 0; i < 16; ++i) s += fmt::format("{}{}", i ? ", " : "", int(t[i]));
  return s + "};\n";
}

}  // namespace

const char* format_dequant_source() {
  static const std::string src =
      table("fmt_iq4nl", kValuesIQ4NL) + table("fmt_mxfp4", kValuesMXFP4) + kDequant;
  return src.c_str();
}

}  // namespace jitllm::cuda
