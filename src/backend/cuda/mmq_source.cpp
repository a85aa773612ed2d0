// CUDA C++ text of the MMQ kernel (batched decode on int8 tensor cores; see mmq.h).
//
// Work split: a CTA owns MR = 16 MT consecutive weight rows of one matrix and every activation
// row of the step (NT8 tiles of 8); its WARPS warps split the row length (warp w takes steps
// w, w + WARPS, ...; a step is one Q4_K super-block, half a Q6_K super-block or 4 Q8_0 blocks),
// so small matrices still fill the card. Each warp keeps f32 accumulators for the whole
// MR x 8 NT8 tile in mma C-fragment order; at the end the warps add their tiles into shared
// memory one after the other (a fixed order: repeated calls give the same bits) and the CTA
// writes out[t][r] (and res[t][r] += it) row-contiguously.
//
// Tensor cores: mma.sync m16n8k32 s8 (Q4_K, Q8_0: one 32-value block of one scale) and m16n8k16
// (Q6_K: its scale groups are 16 values). A = 16 weight rows (thread g, t of the warp gives rows
// g and g + 8), B = 8 activation rows. The dot over a block does not depend on the order of its
// k positions, so a thread's k slots hold the values it loads contiguously: for k32, fragment
// slots 4t..4t+3 and 16+4t..16+4t+3 hold block positions 8t..8t+7 (one 8-byte load of the
// weight and of the activation); for k16, slots 4t..4t+3 hold positions 4t..4t+3. Weights come
// straight from global memory into registers (every byte of a 32-byte sector is used by one
// quad), all loads of a step issued before its first MMA.
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/mmq.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

constexpr const char* kHead = R"(
#define MR (16 * MT)
#define RS (MR + 4)   // row stride of the reduction tile: fragment stores hit 32 distinct banks
#define KB (K / 32)   // activation blocks of 32 per row
#define KIND_Q8_0 3
#define KIND_Q4_K 4
#define KIND_Q6_K 5
struct MqSeg { u64 w, w2, out, res; int rows, cta0; };
struct MqArgs { MqSeg seg[3]; u64 xq, xds; int n, nseg, total, pad; };
__device__ __forceinline__ void mma_k32(int (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_k16(int (&c)[4], u32 a0, u32 a1, u32 b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}
// C fragment of one MMA (rows g, g + 8 of the m-tile; activation rows 2t, 2t + 1 of the n-tile)
// into the f32 accumulators: acc += ws[row] * dx[act row] * c - wm[row] * dsum[act row].
__device__ __forceinline__ void mq_acc(float (&acc)[4], const int (&c)[4], float ws0, float ws1,
                                       float2 x0, float2 x1) {
  acc[0] += ws0 * x0.x * (float)c[0];
  acc[1] += ws0 * x1.x * (float)c[1];
  acc[2] += ws1 * x0.x * (float)c[2];
  acc[3] += ws1 * x1.x * (float)c[3];
}
template <int KIND> struct Mq;
// The activation as the compute steps read it: straight from global memory (int8 rows [n][K],
// (d, d*sum) [n][K / 32]) ...
struct ActG {
  const i8* __restrict__ xq;
  const float2* __restrict__ xds;
  __device__ __forceinline__ uint2 b8(int tok, int k) const { return *(const uint2*)(xq + (size_t)tok * K + k); }
  __device__ __forceinline__ u32 b4(int tok, int k) const { return *(const u32*)(xq + (size_t)tok * K + k); }
  __device__ __forceinline__ void ds2(int tok, int blk, float2& x0, float2& x1) const {
    x0 = xds[(size_t)tok * KB + blk];
    x1 = xds[(size_t)(tok + 1) * KB + blk];
  }
};
// ... or from the warp's copy of one step in shared memory (ACT): rows of XS bytes per activation
// row (padded so the fragment loads of a warp hit distinct banks), then (d, d*sum) as
// [block of the step][activation row] (a thread's two rows 2t, 2t + 1 are one 16-byte load).
#define NTOK (NT8 * 8)
template <int XS>
struct ActS {
  const unsigned char* buf;
  int k0;  // first value of the step
  __device__ __forceinline__ uint2 b8(int tok, int k) const { return *(const uint2*)(buf + tok * XS + (k - k0)); }
  __device__ __forceinline__ u32 b4(int tok, int k) const { return *(const u32*)(buf + tok * XS + (k - k0)); }
  __device__ __forceinline__ void ds2(int tok, int blk, float2& x0, float2& x1) const {
    const float4 v = *(const float4*)(buf + NTOK * XS + ((blk - k0 / 32) * NTOK + tok) * 8);
    x0 = make_float2(v.x, v.y);
    x1 = make_float2(v.z, v.w);
  }
};
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"(d), "l"(src) : "memory");
}
// One step's activation (values [s SV, (s + 1) SV) of every row) into buf by the warp's lanes.
template <int SV, int XS>
__device__ __forceinline__ void stage_act(unsigned char* buf, const i8* xq, const float2* xds, int s, int lane) {
  constexpr int CH = SV / 16, SB = SV / 32;
  const int k0 = s * SV;
  for (int c = lane; c < NTOK * CH; c += 32)
    cp_async16(buf + (c / CH) * XS + (c % CH) * 16, xq + (size_t)(c / CH) * K + k0 + (c % CH) * 16);
  unsigned char* xd = buf + NTOK * XS;
  for (int c = lane; c < NTOK * SB; c += 32)  // source row by row, stored block-major
    cp_async8(xd + ((c % SB) * NTOK + c / SB) * 8, xds + (size_t)(c / SB) * KB + k0 / 32 + c % SB);
  asm volatile("cp.async.commit_group;" ::: "memory");
}
)";

// Q4_K, GGUF blocks of 256 (144 bytes: half d, half dmin, 12 bytes of 6-bit scales/mins, 128
// bytes of nibbles). Sub-block j (32 values) is the low (j even) or high (j odd) nibbles of
// qs[32 (j / 2), + 32); thread t loads qs[32p + 8t, + 8) of each chunk p: 8 values of sub-blocks
// 2p and 2p + 1. The mins go through the activation's d*sum: - dmin m_j * (dx sum x).
constexpr const char* kQ4K = R"(
template <> struct Mq<KIND_Q4_K> {
  static constexpr int STEPS = K / 256, SV = 256, XS = SV + 32;
  struct W { uint4 hd[MT][2]; uint2 qv[MT][2][4]; };
  static __device__ __forceinline__ void load(W& r, const u8* __restrict__ w, const u8* __restrict__ w2,
                                              const int (&row)[MT][2], int b, int t) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* blk = w + ((size_t)row[m][h] * STEPS + b) * 144;
        r.hd[m][h] = *(const uint4*)blk;
#pragma unroll
        for (int p = 0; p < 4; ++p) r.qv[m][h][p] = *(const uint2*)(blk + 16 + 32 * p + 8 * t);
      }
  }
  template <class A>
  static __device__ __forceinline__ void compute(const W& r, int b, int g, int t, const A& x,
                                                 float (&acc)[MT][NT8][4]) {
    const auto& hd = r.hd;
    const auto& qv = r.qv;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float sc[MT][2], mn[MT][2];
      u32 a[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const u32 s0 = hd[m][h].y, s1 = hd[m][h].z, s2 = hd[m][h].w;
          u32 scj, mnj;  // get_scale_min_k4
          if (j < 4) {
            scj = (s0 >> (8 * j)) & 63;
            mnj = (s1 >> (8 * j)) & 63;
          } else {
            const int i = j - 4;
            scj = ((s2 >> (8 * i)) & 0xF) | (((s0 >> (8 * i + 6)) & 3) << 4);
            mnj = ((s2 >> (8 * i + 4)) & 0xF) | (((s1 >> (8 * i + 6)) & 3) << 4);
          }
          sc[m][h] = h2f((u16)(hd[m][h].x & 0xffff)) * (float)scj;
          mn[m][h] = h2f((u16)(hd[m][h].x >> 16)) * (float)mnj;
          const uint2 q = qv[m][h][j >> 1];
          a[m][h] = ((j & 1) ? q.x >> 4 : q.x) & 0x0F0F0F0Fu;      // positions 8t..8t+3
          a[m][2 + h] = ((j & 1) ? q.y >> 4 : q.y) & 0x0F0F0F0Fu;  // positions 8t+4..8t+7
        }
      const int blk = b * 8 + j;
#pragma unroll
      for (int n = 0; n < NT8; ++n) {
        const uint2 xv = x.b8(n * 8 + g, blk * 32 + 8 * t);
        float2 x0, x1;
        x.ds2(n * 8 + 2 * t, blk, x0, x1);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          int c[4] = {0, 0, 0, 0};
          mma_k32(c, a[m][0], a[m][1], a[m][2], a[m][3], xv.x, xv.y);
          mq_acc(acc[m][n], c, sc[m][0], sc[m][1], x0, x1);
          acc[m][n][0] -= mn[m][0] * x0.y;
          acc[m][n][1] -= mn[m][0] * x1.y;
          acc[m][n][2] -= mn[m][1] * x0.y;
          acc[m][n][3] -= mn[m][1] * x1.y;
        }
      }
    }
  }
};
)";

// Q6_K repacked per block as [ql 128][qh 64][scales 16] (208 bytes) with the half d's in w2
// [rows][K / 256]. A step is half a block (128 values, ql 64 bytes, qh 32, 8 scales); its 8
// scale groups of 16 values gq: low (gq < 4) or high nibbles of ql[16 (gq % 4), + 16) and bits
// 2 (gq / 2).. of qh[16 (gq % 2), + 16). Thread t owns positions 4t..4t+3 of every group, stored
// as q - 32 in int8.
constexpr const char* kQ6K = R"(
template <> struct Mq<KIND_Q6_K> {
  static constexpr int STEPS = K / 128, SV = 128, XS = SV + 16;
  static constexpr int NB = K / 256;
  struct W { u32 ql[MT][2][4], qh[MT][2][2]; uint2 sc8[MT][2]; u16 dh[MT][2]; };
  static __device__ __forceinline__ void load(W& r, const u8* __restrict__ w, const u8* __restrict__ w2,
                                              const int (&row)[MT][2], int s, int t) {
    const int b = s >> 1, hh = s & 1;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* blk = w + ((size_t)row[m][h] * NB + b) * 208;
#pragma unroll
        for (int u = 0; u < 4; ++u) r.ql[m][h][u] = *(const u32*)(blk + 64 * hh + 16 * u + 4 * t);
#pragma unroll
        for (int v = 0; v < 2; ++v) r.qh[m][h][v] = *(const u32*)(blk + 128 + 32 * hh + 16 * v + 4 * t);
        r.sc8[m][h] = *(const uint2*)(blk + 192 + 8 * hh);
        r.dh[m][h] = *(const u16*)(w2 + ((size_t)row[m][h] * NB + b) * 2);
      }
  }
  template <class A>
  static __device__ __forceinline__ void compute(const W& r, int s, int g, int t, const A& x,
                                                 float (&acc)[MT][NT8][4]) {
    const int b = s >> 1, hh = s & 1;
    const auto& ql = r.ql;
    const auto& qh = r.qh;
    const auto& sc8 = r.sc8;
    float d[MT][2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) d[m][h] = h2f(r.dh[m][h]);
#pragma unroll
    for (int gq = 0; gq < 8; ++gq) {
      float ws[MT][2];
      u32 a[MT][2];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const u32 lo = ((gq >> 2) ? ql[m][h][gq & 3] >> 4 : ql[m][h][gq & 3]) & 0x0F0F0F0Fu;
          const u32 hb = qh[m][h][gq & 1];
          const int sh = gq >> 1;
          const u32 hi = (sh == 0 ? hb << 4 : sh == 1 ? hb << 2 : sh == 2 ? hb : hb >> 2) & 0x30303030u;
          const u32 y = (lo | hi) ^ 0x20202020u;  // q - 32 per byte: flip bit 5, then sign-extend it
          a[m][h] = y | ((y & 0x20202020u) * 6u);
          const u32 sw = (gq < 4) ? sc8[m][h].x : sc8[m][h].y;
          ws[m][h] = d[m][h] * (float)(i8)(sw >> (8 * (gq & 3)));
        }
      const int blk = b * 8 + hh * 4 + (gq >> 1);
      const int off = b * 256 + hh * 128 + gq * 16 + 4 * t;
#pragma unroll
      for (int n = 0; n < NT8; ++n) {
        const u32 xv = x.b4(n * 8 + g, off);
        float2 x0, x1;
        x.ds2(n * 8 + 2 * t, blk, x0, x1);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          int c[4] = {0, 0, 0, 0};
          mma_k16(c, a[m][0], a[m][1], xv);
          mq_acc(acc[m][n], c, ws[m][0], ws[m][1], x0, x1);
        }
      }
    }
  }
};
)";

// Q8_0 repacked: int8 [rows][K] and the half d of each block of 32 in w2 [rows][K / 32]. A step
// is 4 blocks (128 values); thread t loads positions 8t..8t+7 of each.
constexpr const char* kQ80 = R"(
template <> struct Mq<KIND_Q8_0> {
  static constexpr int STEPS = K / 128, SV = 128, XS = SV + 32;
  struct W { uint2 qv[MT][2][4], dv[MT][2]; };
  static __device__ __forceinline__ void load(W& r, const u8* __restrict__ w, const u8* __restrict__ w2,
                                              const int (&row)[MT][2], int b, int t) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* p = w + (size_t)row[m][h] * K + b * 128;
#pragma unroll
        for (int j = 0; j < 4; ++j) r.qv[m][h][j] = *(const uint2*)(p + 32 * j + 8 * t);
        r.dv[m][h] = *(const uint2*)(w2 + ((size_t)row[m][h] * KB + b * 4) * 2);
      }
  }
  template <class A>
  static __device__ __forceinline__ void compute(const W& r, int b, int g, int t, const A& x,
                                                 float (&acc)[MT][NT8][4]) {
    const auto& qv = r.qv;
    const auto& dv = r.dv;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float ws[MT][2];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const u32 dw = (j < 2) ? dv[m][h].x : dv[m][h].y;
          ws[m][h] = h2f((u16)((j & 1) ? dw >> 16 : dw & 0xffff));
        }
      const int blk = b * 4 + j;
#pragma unroll
      for (int n = 0; n < NT8; ++n) {
        const uint2 xv = x.b8(n * 8 + g, blk * 32 + 8 * t);
        float2 x0, x1;
        x.ds2(n * 8 + 2 * t, blk, x0, x1);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          int c[4] = {0, 0, 0, 0};
          mma_k32(c, qv[m][0][j].x, qv[m][1][j].x, qv[m][0][j].y, qv[m][1][j].y, xv.x, xv.y);
          mq_acc(acc[m][n], c, ws[m][0], ws[m][1], x0, x1);
        }
      }
    }
  }
};
)";

// The kernel: the CTA's segment, its warps' share of the row length, the ordered reduction and
// the stores.
constexpr const char* kTail = R"(
template <int KIND>
__device__ __forceinline__ void mq_segment(const MqSeg& sg, int tile, const MqArgs& a, float* red) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r0 = tile * MR;
  if (r0 >= sg.rows) return;  // the whole CTA
  int row[MT][2];
  tc_rows<MT>(row, r0, g, sg.rows);
  float acc[MT][NT8][4];
  tc_zero<MT, NT8>(acc);
  const u8* w = (const u8*)sg.w;
  const u8* w2 = (const u8*)sg.w2;
  const i8* xq = (const i8*)a.xq;
  const float2* xds = (const float2*)a.xds;
  typename Mq<KIND>::W wa, wb;
  constexpr int SV = Mq<KIND>::SV, XS = Mq<KIND>::XS;
#if ACT
  // This warp's activation buffers (mmq_smem_bytes() on the host sizes them for every kind).
  extern __shared__ __align__(16) unsigned char act_smem[];
  unsigned char* ab0 = act_smem + warp * (PIPE ? 2 : 1) * ACT_BYTES;
  unsigned char* ab1 = ab0 + ACT_BYTES;
#endif
#if PIPE
  // Two register sets: the next step's weights are in flight while this step's MMAs run (the
  // arithmetic and its order are the same as without: only the loads move earlier). With ACT the
  // next step's activation is copied into the other buffer meanwhile.
  int s = warp;
  if (s < Mq<KIND>::STEPS) {
    Mq<KIND>::load(wa, w, w2, row, s, t);
#if ACT
    stage_act<SV, XS>(ab0, xq, xds, s, lane);
#endif
  }
  for (; s < Mq<KIND>::STEPS; s += 2 * WARPS) {
    const bool more = s + WARPS < Mq<KIND>::STEPS;
    if (more) {
      Mq<KIND>::load(wb, w, w2, row, s + WARPS, t);
#if ACT
      stage_act<SV, XS>(ab1, xq, xds, s + WARPS, lane);
#endif
    }
#if ACT
    if (more) asm volatile("cp.async.wait_group 1;" ::: "memory");
    else asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncwarp();
    Mq<KIND>::compute(wa, s, g, t, ActS<XS>{ab0, s * SV}, acc);
    __syncwarp();  // every lane is done with ab0 before it is refilled
#else
    Mq<KIND>::compute(wa, s, g, t, ActG{xq, xds}, acc);
#endif
    if (!more) break;
    const bool more2 = s + 2 * WARPS < Mq<KIND>::STEPS;
    if (more2) {
      Mq<KIND>::load(wa, w, w2, row, s + 2 * WARPS, t);
#if ACT
      stage_act<SV, XS>(ab0, xq, xds, s + 2 * WARPS, lane);
#endif
    }
#if ACT
    if (more2) asm volatile("cp.async.wait_group 1;" ::: "memory");
    else asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncwarp();
    Mq<KIND>::compute(wb, s + WARPS, g, t, ActS<XS>{ab1, (s + WARPS) * SV}, acc);
    __syncwarp();
#else
    Mq<KIND>::compute(wb, s + WARPS, g, t, ActG{xq, xds}, acc);
#endif
  }
#else
  for (int s = warp; s < Mq<KIND>::STEPS; s += WARPS) {
#if ACT
    stage_act<SV, XS>(ab0, xq, xds, s, lane);
#endif
    Mq<KIND>::load(wa, w, w2, row, s, t);
#if ACT
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncwarp();
    Mq<KIND>::compute(wa, s, g, t, ActS<XS>{ab0, s * SV}, acc);
    __syncwarp();
#else
    Mq<KIND>::compute(wa, s, g, t, ActG{xq, xds}, acc);
#endif
  }
#endif
  tc_reduce_store<MT, NT8, WARPS>(acc, red, RS, warp, g, t, r0, sg.rows, a.n, (float*)sg.out, (float*)sg.res);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32) mmq(const MqArgs a) {
  __shared__ float red[NT8 * 8 * RS];  // [activation row][weight row of the tile]
  const int cta = blockIdx.x;
#if NSEG > 2
  if (cta >= a.seg[2].cta0) { mq_segment<KIND2>(a.seg[2], cta - a.seg[2].cta0, a, red); return; }
#endif
#if NSEG > 1
  if (cta >= a.seg[1].cta0) { mq_segment<KIND1>(a.seg[1], cta - a.seg[1].cta0, a, red); return; }
#endif
  mq_segment<KIND0>(a.seg[0], cta, a, red);
}
)";

// Bytes of one step's activation copy for the launch's largest kind: 8 NT8 rows of XS bytes, then
// (d, d*sum) of each block of the step (the SV / XS of the kinds' Mq structs).
size_t act_bytes(const MmqSpec& spec) {
  size_t most = 0;
  for (int i = 0; i < spec.nseg; ++i) {
    const size_t sv = spec.kinds[i] == WeightKind::Q4_K ? 256 : 128;
    const size_t xs = sv + (spec.kinds[i] == WeightKind::Q6_K ? 16 : 32);
    most = std::max(most, size_t(spec.nt8) * 8 * (xs + sv / 32 * 8));
  }
  return most;
}

}  // namespace

bool mmq_supports(WeightKind kind, int64_t k) {
  switch (kind) {
    case WeightKind::Q4_K: return k > 0 && k % 256 == 0;
    case WeightKind::Q6_K: return k > 0 && k % 256 == 0;
    case WeightKind::Q8_0: return k > 0 && k % 128 == 0;
    default: return false;
  }
}

std::string MmqSpec::name() const {
  std::string s = "mmq";
  for (int i = 0; i < nseg; ++i) s += fmt::format("{}{}", i ? "+" : " ", weight_kind_name(kinds[i]));
  return s + fmt::format(" k={} nt8={} mt={} warps={}", k, nt8, mt, warps);
}

std::string mmq_source(const MmqSpec& spec) {
  if (spec.nseg < 1 || spec.nseg > 3) throw_error("mmq: {} matrices in one launch (1 to 3)", spec.nseg);
  if (spec.nt8 < 1 || spec.nt8 * 8 > kMmqMaxRows)
    throw_error("mmq: {} tiles of 8 activation rows is not in [1, {}]", spec.nt8, kMmqMaxRows / 8);
  if (spec.mt < 1 || spec.mt > 4) throw_error("mmq: {} tiles of 16 weight rows is not in [1, 4]", spec.mt);
  if (spec.warps < 1 || spec.warps > 16) throw_error("mmq: {} warps is not in [1, 16]", spec.warps);
  // PIPE 0, ACT 0 (and ACT_BYTES, read only with ACT): the two options that went keep their
  // values in the text, which still has their branches, so every source and its cache key stay
  // as they were.
  std::string defs = fmt::format(
      "#define K {}\n#define NT8 {}\n#define MT {}\n#define WARPS {}\n#define NSEG {}\n#define PIPE 0\n"
      "#define ACT 0\n#define ACT_BYTES {}\n",
      spec.k, spec.nt8, spec.mt, spec.warps, spec.nseg, act_bytes(spec));
  const SegmentKinds sk = segment_kinds(spec.kinds, spec.nseg, spec.k, mmq_supports, "mmq",
                                        "Q4_K, Q6_K: multiples of 256; Q8_0: of 128");
  std::string src = defs + sk.defs + kernel_prelude() + kHead;
  if (sk.q4k) src += kQ4K;
  if (sk.q6k) src += kQ6K;
  if (sk.q80) src += kQ80;
  return src + kTail;
}

}  // namespace jitllm::cuda
