// CUDA C++ text of the DQ-MMA kernel (batched decode on f16 tensor cores; see dq_mma.h).
//
// Work split: a CTA of WARPS warps owns 16 MT WARPS consecutive weight rows of one matrix and
// every activation row of the step (NT8 tiles of 8); each warp owns 16 MT of those rows over the
// whole row length, in steps of 256 values. The step's activation (f16, made from the q8 rows by
// q8_to_f16) is copied into shared memory once per CTA with cp.async, double-buffered, one barrier
// per step; the weights stream from global memory straight into registers, the next step's in
// flight while this one's MMAs run.
//
// Tensor cores: mma.sync m16n8k16 f16 x f16 -> f32. A = 16 weight rows dequantized in registers
// (the block's scale and min folded into each value, so no per-MMA epilogue), B = 8 activation
// rows. The dot over k does not depend on the order of its positions, so a thread's k slots hold
// the values it loads contiguously: of a block of 32, thread t owns positions 8t..8t+7; the first
// MMA's slots (2t, 2t+1, 2t+8, 2t+9) take positions 8t..8t+3, the second's 8t+4..8t+7. Its B
// fragment is then one 16-byte shared-memory load per block and activation tile.
#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/dq_mma.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

constexpr const char* kHead = R"(
#define NTOK (NT8 * 8)
#define STEPS (K / 256)
#define KB (K / 32)
// Halves per staged activation row: 256 + 32, so 576 bytes (64 mod 128): the 8 rows of one
// fragment load phase hit distinct banks.
#define XS 288
// SPLITK: the CTA's warps split the row length of 16 MT rows instead (steps warp, warp + WARPS,
// ...), each reading its activation slices straight from global memory (or, XSTAGE, from its own
// ring of half steps in shared memory; no CTA barrier per step either way), and add their tiles
// in shared memory in warp order at the end.
#if SPLITK
#define ROWS_PER_CTA (16 * MT)
#define RS (16 * MT + 4)  // row stride of the reduction tile
#elif SWIGLU
// SWIGLU (NSEG 2: gate, up of one kind and shape): warps [0, WARPS / 2) own 16 MT gate rows
// each, the other half the same up rows, so the CTA has both halves of its outputs and writes
// silu(gate) up, quantized to q8 and its f16 copy for ffn_down, instead of gate and up.
#define ROWS_PER_CTA (16 * MT * (WARPS / 2))
#define YS (ROWS_PER_CTA + 4)  // row stride of the epilogue tile
#else
#define ROWS_PER_CTA (16 * MT * WARPS)
#endif
// KSPLIT > 1 (warps owning rows): the row length is split over blockIdx.y, each CTA taking
// SPS consecutive steps; the CTAs of one row tile write partial tiles and the last to arrive adds
// them in split order (the same order whoever arrives last, so repeated launches give the same
// bits) and stores the sum.
#define SPS ((STEPS + KSPLIT - 1) / KSPLIT)
#define KIND_Q8_0 3
#define KIND_Q4_K 4
#define KIND_Q6_K 5
struct DqSeg { u64 w, w2, out, res; int rows, cta0; };
// y*: SWIGLU's outputs (silu(gate) up [n][rows] f32, its q8 rows, their (d, d sum), f16 copy).
// part, cnt: KSPLIT's partial tiles [KSPLIT][total][NTOK][ROWS_PER_CTA] and its arrival count per
// row tile (zero between launches).
struct DqArgs { DqSeg seg[3]; u64 xh; int n, nseg, total, pad; u64 yout, yq, yds, yh; u64 part, cnt; };
__device__ __forceinline__ void mma_f16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ u32 hsub2(u32 a, u32 b) { u32 r; asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 hmul2(u32 a, u32 b) { u32 r; asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c) { u32 r; asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 s) { u32 r; asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s)); return r; }
// (f16(lo), f16(hi)) in one register, lo in the low half.
__device__ __forceinline__ u32 h2pack(float lo, float hi) { u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
// Bytes 0, 1 (sel 0x4140) or 2, 3 (0x4342) of v (each < 256) as the f16 pair (1024 + b0, 1024 + b1).
#define BYTES_F16(v, sel) prmt((v), 0x64646464u, (sel))
// Positions 0..7 of a block from the byte values in w0 (0..3) and w1 (4..7) as four f16 pairs:
// (b - off) s, with bias = 1024 + off in both halves (the subtraction is exact), and + m.
__device__ __forceinline__ void dq_bytes(u32 w0, u32 w1, u32 bias, u32 s2, u32 (&a)[4]) {
  a[0] = hmul2(hsub2(BYTES_F16(w0, 0x4140u), bias), s2);
  a[1] = hmul2(hsub2(BYTES_F16(w0, 0x4342u), bias), s2);
  a[2] = hmul2(hsub2(BYTES_F16(w1, 0x4140u), bias), s2);
  a[3] = hmul2(hsub2(BYTES_F16(w1, 0x4342u), bias), s2);
}
__device__ __forceinline__ void dq_bytes(u32 w0, u32 w1, u32 bias, u32 s2, u32 m2, u32 (&a)[4]) {
  a[0] = hfma2(hsub2(BYTES_F16(w0, 0x4140u), bias), s2, m2);
  a[1] = hfma2(hsub2(BYTES_F16(w0, 0x4342u), bias), s2, m2);
  a[2] = hfma2(hsub2(BYTES_F16(w1, 0x4140u), bias), s2, m2);
  a[3] = hfma2(hsub2(BYTES_F16(w1, 0x4342u), bias), s2, m2);
}
#if X_L1
// 16 bytes global -> shared through L1 (the CTAs of an SM share the step's activation there).
__device__ __forceinline__ void cp_async16_l1(void* dst, const void* src) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
}
#define XCOPY cp_async16_l1
#else
#define XCOPY cp_async16
#endif
#if E4M3
// Bytes 0, 1 and 2, 3 of v (each 0..15) as e4m3: (b0 / 512, b1 / 512) and (b2 / 512, b3 / 512).
__device__ __forceinline__ void e4m3x4(u32 v, u32& lo, u32& hi) {
  asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %2;\ncvt.rn.f16x2.e4m3x2 %0, a;\ncvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi) : "r"(v));
}
#endif
// Step s of every activation row (values [256 s, 256 s + 256)) into one staging buffer, as one
// cp.async group (an empty one when s is past the CTA's last step, so every step commits one).
// Thread c copies 16 bytes of row c / 32, c + 32 WARPS of row c / 32 + WARPS, ...: x0 and b0 are
// its first source and destination, set once (the per-copy addresses are then constant offsets).
__device__ __forceinline__ void dq_stage(u16* buf, const u16* __restrict__ x0, int b0, int s, int end) {
  if (s < end) {
    const u16* src = x0 + s * 256;
    u16* dst = buf + b0;
    if (NTOK % WARPS == 0) {
#pragma unroll
      for (int i = 0; i < NTOK / WARPS; ++i) XCOPY(dst + i * WARPS * XS, src + (size_t)i * WARPS * K);
    } else {
      for (int c = threadIdx.x, i = 0; c < NTOK * 32; c += WARPS * 32, ++i)
        XCOPY(dst + i * WARPS * XS, src + (size_t)i * WARPS * K);
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// A kind: W holds one step's weight bytes of the warp's rows (row[m][h]: m-tile m, h = 0 for
// fragment row g, 1 for g + 8); scales() makes a row's per-step scale registers S once per step,
// block() the A registers of block j of the step for one row: positions 8t..8t+7 as four f16
// pairs.
template <int KIND> struct Dq;
)";

// Q4_K (GGUF blocks of 256 as stored: half d, half dmin, 12 bytes of 6-bit scales/mins, 128
// bytes of nibbles; block j of 32 is the low (j even) or high (j odd) nibbles of qs[32 (j / 2),
// + 32)). Value = d sc_j q - dmin m_j: (1024 + q) as f16 from the byte, minus 1024 (exact), then
// one fma with (s, -m) rounded to f16.
constexpr const char* kQ4K = R"(
template <> struct Dq<KIND_Q4_K> {
  struct W { uint4 hd[MT][2]; uint2 qv[MT][2][4]; };
  static __device__ __forceinline__ void load(W& r, const u8* __restrict__ w, const u8* __restrict__ w2,
                                              const int (&row)[MT][2], int s, int t) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* blk = w + ((size_t)row[m][h] * STEPS + s) * 144;
        r.hd[m][h] = ldw16(blk);
#pragma unroll
        for (int p = 0; p < 4; ++p) r.qv[m][h][p] = ldw8(blk + 16 + 32 * p + 8 * t);
      }
  }
  // The step's eight (d sc_j, -dmin m_j) as four f16 pairs each (j & ~1, j | 1), made once per
  // step and row instead of once per block of 32: get_scale_min_k4 for the four sub-blocks of a
  // half at once (a byte each): j < 4 in the low 6 bits of s0 / s1, j >= 4 split over s2's
  // nibbles and the top 2 bits of s0 / s1. The pair as f16 (exact small integers), times d (and
  // -dmin) in f16: one rounding of the exact product, as f16(d * sc) in f32.
  struct S { u32 sp[4], mp[4]; };
  static __device__ __forceinline__ void scales(const W& r, int m, int h, S& o) {
    const uint4 hd = r.hd[m][h];
    const u32 s0 = hd.y, s1 = hd.z, s2 = hd.w;
    const u32 d2 = prmt(hd.x, 0u, 0x1010u), dn2 = prmt(hd.x, 0u, 0x3232u) ^ 0x80008000u;
    const u32 sc[2] = {s0 & 0x3F3F3F3Fu, (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u)};
    const u32 mn[2] = {s1 & 0x3F3F3F3Fu, ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u)};
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const u32 sel = (p & 1) ? 0x4342u : 0x4140u;
      o.sp[p] = hmul2(hsub2(BYTES_F16(sc[p >> 1], sel), 0x64006400u), d2);
#if E4M3
      o.sp[p] = hmul2(o.sp[p], 0x60006000u);  // x 512, exact (|d sc| < 128)
#endif
      o.mp[p] = hmul2(hsub2(BYTES_F16(mn[p >> 1], sel), 0x64006400u), dn2);
    }
  }
  static __device__ __forceinline__ void block(const W& r, const S& sc, int j, int m, int h, int t, u32 (&a)[4]) {
    // This j's half of its pair broadcast to both halves.
    const u32 s2h = prmt(sc.sp[j >> 1], 0u, (j & 1) ? 0x3232u : 0x1010u);
    const u32 m2h = prmt(sc.mp[j >> 1], 0u, (j & 1) ? 0x3232u : 0x1010u);
    const uint2 q = r.qv[m][h][j >> 1];
    const u32 n0 = ((j & 1) ? q.x >> 4 : q.x) & 0x0F0F0F0Fu, n1 = ((j & 1) ? q.y >> 4 : q.y) & 0x0F0F0F0Fu;
#if E4M3
    u32 e[4];
    e4m3x4(n0, e[0], e[1]);
    e4m3x4(n1, e[2], e[3]);
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = hfma2(e[i], s2h, m2h);
#else
    dq_bytes(n0, n1, 0x64006400u, s2h, m2h, a);
#endif
  }
};
)";

// Q6_K repacked per block as [ql 128][qh 64][scales 16] (208 bytes) with the half d's in w2
// [rows][K / 256]. Block j = 4 hh + qq of 32 (hh: half of the block, qq: quarter of the half):
// low (qq < 2) or high nibbles of ql[64 hh + 32 (qq % 2), + 32], bits 2 qq.. of qh[32 hh, + 32];
// positions 8t..8t+7 are in scale group 2 j + t / 2. Value = d sc (q - 32): (1024 + q) from the
// byte, minus 1056 (exact), times (d sc) rounded to f16.
constexpr const char* kQ6K = R"(
template <> struct Dq<KIND_Q6_K> {
  static constexpr int NB = K / 256;
  struct W { uint2 ql[MT][2][4], qh[MT][2][2]; uint4 sc[MT][2]; u16 dh[MT][2]; };
  static __device__ __forceinline__ void load(W& r, const u8* __restrict__ w, const u8* __restrict__ w2,
                                              const int (&row)[MT][2], int s, int t) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* blk = w + ((size_t)row[m][h] * NB + s) * 208;
#pragma unroll
        for (int u = 0; u < 4; ++u) r.ql[m][h][u] = ldw8(blk + 64 * (u >> 1) + 32 * (u & 1) + 8 * t);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) r.qh[m][h][hh] = ldw8(blk + 128 + 32 * hh + 8 * t);
        r.sc[m][h] = ldw16(blk + 192);
        r.dh[m][h] = ldw2(w2 + ((size_t)row[m][h] * NB + s) * 2);
      }
  }
  struct S {};
  static __device__ __forceinline__ void scales(const W&, int, int, S&) {}
  static __device__ __forceinline__ void block(const W& r, const S&, int j, int m, int h, int t, u32 (&a)[4]) {
    const int hh = j >> 2, qq = j & 3;
    const uint2 l = r.ql[m][h][hh * 2 + (qq & 1)];
    const uint2 hb = r.qh[m][h][hh];
    const u32 q0 = (((qq >= 2) ? l.x >> 4 : l.x) & 0x0F0F0F0Fu) | (((hb.x >> (2 * qq)) & 0x03030303u) << 4);
    const u32 q1 = (((qq >= 2) ? l.y >> 4 : l.y) & 0x0F0F0F0Fu) | (((hb.y >> (2 * qq)) & 0x03030303u) << 4);
    const uint4 scv = r.sc[m][h];
    const u32 word = (j >> 1) == 0 ? scv.x : (j >> 1) == 1 ? scv.y : (j >> 1) == 2 ? scv.z : scv.w;
    const float sc = h2f(r.dh[m][h]) * (float)(i8)(word >> (8 * (2 * (j & 1) + (t >> 1))));
    const u32 s2h = h2pack(sc, sc);
    dq_bytes(q0, q1, 0x64206420u, s2h, a);
  }
};
)";

// Q8_0 repacked: int8 [rows][K] and the half d of each block of 32 in w2 [rows][K / 32]. Value =
// d q: (1024 + 128 + q) from the byte with its sign bit flipped, minus 1152 (exact), times d (one
// rounding of the exact product, as f16(d * q) in f32).
constexpr const char* kQ80 = R"(
template <> struct Dq<KIND_Q8_0> {
  struct W { uint2 q[MT][2][8]; uint4 d[MT][2]; };
  static __device__ __forceinline__ void load(W& r, const u8* __restrict__ w, const u8* __restrict__ w2,
                                              const int (&row)[MT][2], int s, int t) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* p = w + (size_t)row[m][h] * K + s * 256;
#pragma unroll
        for (int j = 0; j < 8; ++j) r.q[m][h][j] = ldw8(p + 32 * j + 8 * t);
        r.d[m][h] = ldw16(w2 + ((size_t)row[m][h] * KB + s * 8) * 2);
      }
  }
  struct S {};
  static __device__ __forceinline__ void scales(const W&, int, int, S&) {}
  static __device__ __forceinline__ void block(const W& r, const S&, int j, int m, int h, int t, u32 (&a)[4]) {
    const uint4 dv = r.d[m][h];
    const u32 dw = (j >> 1) == 0 ? dv.x : (j >> 1) == 1 ? dv.y : (j >> 1) == 2 ? dv.z : dv.w;
    const u32 dh = (j & 1) ? dw >> 16 : dw & 0xffffu;
    const u32 d2 = dh | (dh << 16);
    const u32 x0 = r.q[m][h][j].x ^ 0x80808080u, x1 = r.q[m][h][j].y ^ 0x80808080u;
    dq_bytes(x0, x1, 0x64806480u, d2, a);
  }
};
)";

constexpr const char* kTail = R"(
// One step: 8 blocks of 32, each dequantized once per row and used for every activation tile.
// xb: value 0 of the step for activation row 0; XR: halves from one activation row to the next
// (XS in the staging buffer, K in global memory).
// Blocks [J0, J1) of the step; SWZ: xb is one half step staged by dq_stage_half (rows of 128
// values, block j - J0 of row n * 8 + g at 16-byte chunk 4 ((j - J0) ^ (g & 1)) + t).
template <int KIND, int XR, int J0 = 0, int J1 = 8, bool SWZ = false>
__device__ __forceinline__ void dq_compute(const typename Dq<KIND>::W& r, const typename Dq<KIND>::S (&sc)[MT][2],
                                           const u16* __restrict__ xb, int g, int t, float (&acc)[MT][NT8][4]) {
#pragma unroll
  for (int j = J0; j < J1; ++j) {
    u32 a[MT][2][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) Dq<KIND>::block(r, sc[m][h], j, m, h, t, a[m][h]);
#pragma unroll
    for (int n = 0; n < NT8; ++n) {
      const int col = SWZ ? 32 * ((j - J0) ^ (g & 1)) : 32 * j;
      const uint4 b = *(const uint4*)(xb + (size_t)(n * 8 + g) * XR + col + 8 * t);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        mma_f16(acc[m][n], a[m][0][0], a[m][1][0], a[m][0][1], a[m][1][1], b.x, b.y);
        mma_f16(acc[m][n], a[m][0][2], a[m][1][2], a[m][0][3], a[m][1][3], b.z, b.w);
      }
    }
  }
}
template <int KIND>
__device__ __forceinline__ void dq_scales(const typename Dq<KIND>::W& r, typename Dq<KIND>::S (&sc)[MT][2]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) Dq<KIND>::scales(r, m, h, sc[m][h]);
}
// One whole step (the scales made once).
template <int KIND, int XR>
__device__ __forceinline__ void dq_step(const typename Dq<KIND>::W& r, const u16* __restrict__ xb, int g, int t,
                                        float (&acc)[MT][NT8][4]) {
  typename Dq<KIND>::S sc[MT][2];
  dq_scales<KIND>(r, sc);
  dq_compute<KIND, XR>(r, sc, xb, g, t, acc);
}
#if SPLITK && XSTAGE
// Half step q of a warp (values [128 (q % 2), + 128) of its step q / 2) of every activation row into
// buf [NTOK][128], the 16-byte chunk c of row i at c ^ 4 (i & 1) (so the fragment loads of rows g
// and g + 1 fall in different banks), as one cp.async group (empty past the warp's last half).
__device__ __forceinline__ void dq_stage_half(u16* buf, const u16* __restrict__ xh, int step, int half, bool any,
                                              int lane) {
  if (any) {
    const u16* src = xh + step * 256 + half * 128 + (lane & 15) * 8;
    const int c = lane & 15;
#pragma unroll
    for (int i = 0; i < NTOK / 2; ++i) {
      const int row = (lane >> 4) + 2 * i;
      cp_async16(buf + row * 128 + ((c ^ ((row & 1) * 4)) * 8), src + (size_t)row * K);
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}
#endif
#if SWIGLU
// The CTA's tile y[NTOK][YS] over the staging buffers (every warp done with them): the up half's
// values, then silu(gate) up in their place (the expression of swiglu_q8, so the same bits as
// the two launches), then one warp per activation row and block of 32 rows: y, its q8 block and
// f16 copy (q8_block, as swiglu_q8 writes them). rows is a multiple of 32.
__device__ __forceinline__ void dq_swiglu_store(const float (&acc)[MT][NT8][4], const DqArgs& a, u16* xs,
                                                int tile, int warp, int g, int t, int rows) {
  float* y = (float*)xs;
  const bool up = warp >= WARPS / 2;
  const int w0 = (warp % (WARPS / 2)) * 16 * MT;
  __syncthreads();
  if (up) tc_each<MT, NT8>(acc, g, t, [&](float v, int r, int tok) { y[tok * YS + w0 + r] = v; });
  __syncthreads();
  if (!up)
    tc_each<MT, NT8>(acc, g, t, [&](float gv, int r, int tok) {
      float* p = y + tok * YS + w0 + r;
      *p = gv / (1.0f + expf(-gv)) * *p;
    });
  __syncthreads();
  const int lane = threadIdx.x & 31;
  constexpr int NBLK = ROWS_PER_CTA / 32;
  for (int p = warp; p < a.n * NBLK; p += WARPS) {
    const int tok = p / NBLK, b = p % NBLK, r = tile * ROWS_PER_CTA + b * 32;
    if (r >= rows) continue;  // the last tile's rows past the end (whole blocks: rows % 32 == 0)
    const float v = y[tok * YS + b * 32 + lane];
    ((float*)a.yout)[(size_t)tok * rows + r + lane] = v;
    q8_block(v, lane, (i8*)a.yq, (float2*)a.yds, ((long long)tok * rows + r) / 32, (u16*)a.yh);
  }
}
#endif
#if KSPLIT > 1
// This CTA's partial tile into a.part, then (the last CTA of the row tile to arrive) the sum of
// the KSPLIT partials in split order into out (and res). r0: the warp's first row.
__device__ __forceinline__ void dq_ksplit_store(const float (&acc)[MT][NT8][4], const DqArgs& a, const DqSeg& sg,
                                                int r0, int warp, int g, int t) {
  __shared__ int last;
  float* part = (float*)a.part;
  const int lr0 = warp * 16 * MT;  // the warp's first row in the CTA's tile
  auto at = [&](int k, int tok, int rr) {
    return part + (((size_t)k * a.total + blockIdx.x) * NTOK + tok) * ROWS_PER_CTA + lr0 + rr;
  };
  tc_each<MT, NT8>(acc, g, t, [&](float v, int rr, int tok) {
    if (r0 + rr < sg.rows && tok < a.n) __stcg(at(blockIdx.y, tok, rr), v);
  });
  __threadfence();  // the partials visible before the arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    int* c = (int*)a.cnt + blockIdx.x;
    last = atomicAdd(c, 1) == KSPLIT - 1;
    if (last) atomicExch(c, 0);  // every CTA of the tile has arrived: zero for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float* out = (float*)sg.out;
  float* res = (float*)sg.res;
  tc_each<MT, NT8>(acc, g, t, [&](float v, int rr, int tok) {
    const int r = r0 + rr;
    if (r < sg.rows && tok < a.n) {
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < KSPLIT; ++k) sum += k == (int)blockIdx.y ? v : __ldcg(at(k, tok, rr));
      const size_t o = (size_t)tok * sg.rows + r;
      out[o] = sum;
      if (res) res[o] += sum;
    }
  });
}
#endif
template <int KIND>
__device__ __forceinline__ void dq_segment(const DqSeg& sg, int tile, const DqArgs& a, u16* xs) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Warps past the last row still take part in the copies and barriers (their rows clamp to the
  // last one; nothing of theirs is stored).
#if SPLITK
  const int r0 = tile * ROWS_PER_CTA;
#elif SWIGLU
  const int r0 = tile * ROWS_PER_CTA + (warp % (WARPS / 2)) * 16 * MT;
#else
  const int r0 = tile * ROWS_PER_CTA + warp * 16 * MT;
#endif
  int row[MT][2];
  tc_rows<MT>(row, r0, g, sg.rows);
  float acc[MT][NT8][4];
  tc_zero<MT, NT8>(acc);
  const u8* w = (const u8*)sg.w;
  const u8* w2 = (const u8*)sg.w2;
  const u16* xh = (const u16*)a.xh;
  // A ring of RING steps of weights in registers: step i + RING - 1's loads are issued before step
  // i's MMAs, so RING - 1 steps per warp are in flight (the bytes in flight per SM set the rate).
  typename Dq<KIND>::W wr[RING];
#if SPLITK
  // This warp's steps: warp, warp + WARPS, ...
  const int steps = warp < STEPS ? (STEPS - warp + WARPS - 1) / WARPS : 0;
#pragma unroll
  for (int p = 0; p < RING - 1; ++p)
    if (p < steps) Dq<KIND>::load(wr[p], w, w2, row, warp + p * WARPS, t);
  PDL_WAIT();  // the weights do not depend on the previous kernel; the activation does
#if XSTAGE
  // This warp's activation in a ring of 3 half steps [3][NTOK][128] (its first two staged here).
  u16* xw = xs + warp * 3 * NTOK * 128;
  dq_stage_half(xw, xh, warp, 0, steps > 0, lane);
  dq_stage_half(xw + NTOK * 128, xh, warp, 1, steps > 0, lane);
#endif
  for (int i = 0; i < steps; i += RING) {
#pragma unroll
    for (int b = 0; b < RING; ++b) {
      const int it = i + b;
      if (it < steps) {
        if (it + RING - 1 < steps) Dq<KIND>::load(wr[(b + RING - 1) % RING], w, w2, row, warp + (it + RING - 1) * WARPS, t);
#if XSTAGE
        typename Dq<KIND>::S sc[MT][2];
        dq_scales<KIND>(wr[b], sc);
        // Half steps 2 it, 2 it + 1 from the ring; before each, its copies done (all but the
        // newest group) and the warp past the previous half (whose buffer the copy of the half
        // two ahead takes).
        asm volatile("cp.async.wait_group 1;" ::: "memory");
        __syncwarp();
        dq_stage_half(xw + ((2 * it + 2) % 3) * NTOK * 128, xh, warp + (it + 1) * WARPS, 0, it + 1 < steps, lane);
        dq_compute<KIND, 128, 0, 4, true>(wr[b], sc, xw + ((2 * it) % 3) * NTOK * 128, g, t, acc);
        asm volatile("cp.async.wait_group 1;" ::: "memory");
        __syncwarp();
        dq_stage_half(xw + ((2 * it + 3) % 3) * NTOK * 128, xh, warp + (it + 1) * WARPS, 1, it + 1 < steps, lane);
        dq_compute<KIND, 128, 4, 8, true>(wr[b], sc, xw + ((2 * it + 1) % 3) * NTOK * 128, g, t, acc);
#else
        dq_step<KIND, K>(wr[b], xh + (warp + it * WARPS) * 256, g, t, acc);
#endif
      }
    }
  }
  PDL_TRIGGER();  // the next kernel may start its own weight loads
#if XSTAGE
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();  // every warp done with its ring: the reduction tile overlaps them
#endif
  tc_reduce_store<MT, NT8, WARPS>(acc, (float*)xs, RS, warp, g, t, r0, sg.rows, a.n, (float*)sg.out, (float*)sg.res);
#else
  // The activation in RING staging buffers, step i in buffer i % RING, its copy issued RING - 1 steps
  // ahead; before step i each thread waits for its own copies of it (all but the RING - 2 newest
  // groups), then for every thread (the copies visible, every warp done with step i - 1, whose
  // buffer the copy of step i + RING - 1 takes).
  const u16* x0 = xh + (size_t)warp * K + lane * 8;  // this thread's first staging copy
  const int b0 = warp * XS + lane * 8;
  // This CTA's steps [s0, s0 + steps) (all of them unless KSPLIT).
  const int s0 = KSPLIT > 1 ? (int)blockIdx.y * SPS : 0;
  const int steps = KSPLIT > 1 ? max(0, min(STEPS, s0 + SPS) - s0) : STEPS;
#pragma unroll
  for (int p = 0; p < RING - 1; ++p)
    if (p < steps) Dq<KIND>::load(wr[p], w, w2, row, s0 + p, t);
  PDL_WAIT();  // the weights do not depend on the previous kernel; the activation does
#pragma unroll
  for (int p = 0; p < RING - 1; ++p) dq_stage(xs + p * NTOK * XS, x0, b0, s0 + p, s0 + steps);
  for (int i = 0; i < steps; i += RING) {
#pragma unroll
    for (int b = 0; b < RING; ++b) {
      const int it = i + b;
      if (it < steps) {
        asm volatile("cp.async.wait_group %0;" :: "n"(RING - 2) : "memory");
        __syncthreads();
        dq_stage(xs + ((b + RING - 1) % RING) * NTOK * XS, x0, b0, s0 + it + RING - 1, s0 + steps);
        if (it + RING - 1 < steps) Dq<KIND>::load(wr[(b + RING - 1) % RING], w, w2, row, s0 + it + RING - 1, t);
        dq_step<KIND, XS>(wr[b], xs + b * NTOK * XS, g, t, acc);
      }
    }
  }
  PDL_TRIGGER();  // the next kernel may start its own weight loads
#if SWIGLU
  dq_swiglu_store(acc, a, xs, tile, warp, g, t, sg.rows);
#elif KSPLIT > 1
  dq_ksplit_store(acc, a, sg, r0, warp, g, t);
#else
  float* out = (float*)sg.out;
  float* res = (float*)sg.res;
  tc_each<MT, NT8>(acc, g, t, [&](float v, int rr, int tok) {
    const int r = r0 + rr;
    if (r < sg.rows && tok < a.n) {
      const size_t o = (size_t)tok * sg.rows + r;
      out[o] = v;
      if (res) res[o] += v;
    }
  });
#endif
#endif
}
extern "C" __global__ void __launch_bounds__(WARPS * 32) dqmma(const DqArgs a) {
  extern __shared__ __align__(16) unsigned char dq_smem[];
  // [RING][NTOK][XS] staged activation (warps owning rows), [WARPS][3][NTOK][128] (XSTAGE), then
  // the reduction or epilogue tile over it.
  u16* xs = (u16*)dq_smem;
  const int cta = blockIdx.x;
#if SWIGLU
  const DqSeg sg = (threadIdx.x >> 5) < WARPS / 2 ? a.seg[0] : a.seg[1];
  dq_segment<KIND0>(sg, cta, a, xs);
  return;
#endif
#if NSEG > 2
  if (cta >= a.seg[2].cta0) { dq_segment<KIND2>(a.seg[2], cta - a.seg[2].cta0, a, xs); return; }
#endif
#if NSEG > 1
  if (cta >= a.seg[1].cta0) { dq_segment<KIND1>(a.seg[1], cta - a.seg[1].cta0, a, xs); return; }
#endif
  dq_segment<KIND0>(a.seg[0], cta, a, xs);
}
)";

// The activation for the kernel above: f16(q d) of the q8 blocks, 8 values per thread, so the
// batched matmuls see the same rounded activation as the solo matvec (up to the f16 rounding).
constexpr const char* kToF16 = R"(
extern "C" __global__ void q8_to_f16(const i8* __restrict__ xq, const float2* __restrict__ xds,
                                     u16* __restrict__ xh, long long groups) {
  PDL_TRIGGER();
  PDL_WAIT();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  const uint2 q = *(const uint2*)(xq + i * 8);
  const float d = xds[i / 4].x;
  u32 o[4];
  const u32 w[2] = {q.x, q.y};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const u32 v = w[k >> 1] >> (16 * (k & 1));
    o[k] = (u32)f2h((float)(i8)(v & 0xff) * d) | ((u32)f2h((float)(i8)(v >> 8) * d) << 16);
  }
  *(uint4*)(xh + i * 8) = make_uint4(o[0], o[1], o[2], o[3]);
}
)";

}  // namespace

bool dq_mma_supports(WeightKind kind, int64_t k) {
  return (kind == WeightKind::Q4_K || kind == WeightKind::Q6_K || kind == WeightKind::Q8_0) && k > 0 &&
         k % 256 == 0;
}

size_t dq_mma_smem_bytes(const DqMmaSpec& spec) {
  // (The swiglu epilogue's tile, NTOK x (8 MT WARPS + 4) floats, fits in the staging buffers.)
  const size_t ntok = size_t(spec.nt8) * 8;
  if (!spec.splitk) return size_t(spec.stages) * ntok * 288 * 2;
  return ntok * (16 * spec.mt + 4) * 4;  // the reduction tile
}

std::string DqMmaSpec::name() const {
  std::string s = "dqmma";
  for (int i = 0; i < nseg; ++i) s += fmt::format("{}{}", i ? "+" : " ", weight_kind_name(kinds[i]));
  return s + fmt::format(" k={} nt8={} mt={} warps={}{}{}{}", k, nt8, mt, warps, splitk ? " splitk" : "",
                         stages != 2 ? fmt::format(" nb={}", stages) : "", swiglu ? " swiglu" : "");
}

std::string dq_mma_source(const DqMmaSpec& spec) {
  if (spec.nseg < 1 || spec.nseg > 3) throw_error("dqmma: {} matrices in one launch (1 to 3)", spec.nseg);
  if (spec.nt8 < 1 || spec.nt8 > 8) throw_error("dqmma: {} tiles of 8 activation rows is not in [1, 8]", spec.nt8);
  if (spec.mt < 1 || spec.mt > 2) throw_error("dqmma: {} tiles of 16 weight rows per warp is not in [1, 2]", spec.mt);
  if (spec.warps < 1 || spec.warps > 8) throw_error("dqmma: {} warps is not in [1, 8]", spec.warps);
  if (spec.stages < 2 || spec.stages > 4) throw_error("dqmma: {} steps in the ring is not in [2, 4]", spec.stages);
  // (Whole q8 blocks per CTA: 16 MT WARPS / 2 rows a multiple of 32.)
  if (spec.swiglu && (spec.nseg != 2 || spec.kinds[0] != spec.kinds[1] || spec.splitk ||
                      spec.warps % 2 != 0 || (8 * spec.mt * spec.warps) % 32 != 0))
    throw_error("dqmma: the swiglu epilogue takes gate and up of one kind, rows per warp, whole q8 blocks per CTA");
  // X_L1 1, KSPLIT 1, E4M3 0, XSTAGE 0: the options that went (the activation always through L1;
  // no split row length, e4m3 unpacking or staged activation) keep their values in the text, which
  // still has their branches, so every source and its cache key stay as they were.
  std::string defs = fmt::format(
      "#define K {}\n#define NT8 {}\n#define MT {}\n#define WARPS {}\n#define NSEG {}\n#define SPLITK {}\n"
      "#define RING {}\n#define SWIGLU {}\n#define X_L1 1\n#define KSPLIT 1\n#define E4M3 0\n#define XSTAGE 0\n",
      spec.k, spec.nt8, spec.mt, spec.warps, spec.nseg, spec.splitk ? 1 : 0, spec.stages, spec.swiglu ? 1 : 0);
  const SegmentKinds sk = segment_kinds(spec.kinds, spec.nseg, spec.k, dq_mma_supports, "dqmma",
                                        "Q4_K, Q6_K, Q8_0: multiples of 256");
  std::string src = defs + sk.defs + kernel_prelude() + kHead;
  if (sk.q4k) src += kQ4K;
  if (sk.q6k) src += kQ6K;
  if (sk.q80) src += kQ80;
  return src + kTail;
}

std::string q8_to_f16_source() { return kernel_prelude() + std::string(kToF16); }

}  // namespace jitllm::cuda
