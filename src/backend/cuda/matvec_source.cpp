// CUDA C++ text of the matvec kernel (see kernel_source.h for the launch conventions): one
// launch for up to 3 matrices of any kinds reading one activation, RPW weight rows per warp, NT
// activation rows per pass, the optional residual, norm, rope and swiglu epilogues, and the PDL
// weight preload.
#include <fmt/format.h>

#include "backend/cuda/kernel_source.h"
#include "backend/cuda/weight_formats.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

// The matvec kernel: a launch covers up to 3 matrices that read the same activation ("segments":
// q/k/v, gate/up); CTAs [cta0 of segment i, cta0 of segment i + 1) work on segment i. Each
// warp owns RPW consecutive rows of its segment and keeps every weight load of one step of the
// row in flight for all RPW rows before the dot products; the activation slice a lane needs
// depends only on its lane, so it is loaded once per step and used for all RPW rows. Weights are
// read with ld.global.nc.L1::no_allocate (streamed once; L1 stays for the activation). The
// epilogue reduces across the warp and stores out[t][r]; with `res` it also does res[t][r] +=
// (the residual add after wo / ffn_down, so no separate add launch).
constexpr const char* kMatvecHead = R"(
struct MvSeg { u64 w, w2, out, res; int rows, cta0; };
struct MvArgs {
  MvSeg seg[3]; u64 xq, xds, xf; int n, nseg, total, pad;
  u64 nw, nout, nq, nds, cnt; float eps; int ncols;        // NORM epilogue (see mv_norm_row)
  u64 rope, kvrows, koff, voff; int hd, nrot, kvf16, pad2;  // ROPE epilogue (see mv_segment)
};
#define KIND_F32 0
#define KIND_F16 1
#define KIND_BF16 2
#define KIND_Q8_0 3
#define KIND_Q4_K 4
#define KIND_Q6_K 5
template <int KIND> struct Mv;
// PRELOAD (PDL): a body with kPreload waits for the previous kernel (MV_WAIT) after issuing its
// weight loads of a step and before reading the activation, so the first step's weights are in
// flight while the previous kernel finishes; other bodies are entered after the wait.
#if PRELOAD
#define MV_WAIT() PDL_WAIT()
#else
#define MV_WAIT()
#endif
template <class T, class = void> struct MvPreloads { static constexpr bool value = false; };
template <class T> struct MvPreloads<T, decltype((void)T::kPreload, void())> { static constexpr bool value = T::kPreload; };
)";

// Q4_K (GGUF block of 256: half d, half dmin, 12 bytes of 6-bit scales/mins, 128 bytes of
// nibbles). Four lanes per block, lane sub-index p owns qs[32p, 32p+32): its low nibbles are
// sub-block 2p, its high nibbles sub-block 2p+1. Activation: int8 blocks of 32 with (d, d*sum).
constexpr const char* kQ4K = R"(
template <> struct Mv<KIND_Q4_K> {
  static constexpr bool kPreload = true;
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int NB = K / 256;
    const int p = lane & 3;
#pragma unroll UNR
    for (int b = lane >> 2; b < NB; b += 8) {
      uint4 hd[RPW], qa[RPW], qb[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const u8* blk = w + ((size_t)rr[j] * NB + b) * 144;
        hd[j] = ldw16(blk);
        qa[j] = ldw16(blk + 16 + 32 * p);
        qb[j] = ldw16(blk + 32 + 32 * p);
      }
      MV_WAIT();
      float da[RPW], db[RPW], ma[RPW], mb[RPW];
      const int ja = 2 * p, jb = 2 * p + 1;
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const float d = h2f((u16)(hd[j].x & 0xffff)), dmin = h2f((u16)(hd[j].x >> 16));
        const u32 s0 = hd[j].y, s1 = hd[j].z, s2 = hd[j].w;
        float sca, mna, scb, mnb;  // get_scale_min_k4 for sub-blocks 2p and 2p + 1
        if (p < 2) {
          sca = (float)((s0 >> (8 * ja)) & 63); mna = (float)((s1 >> (8 * ja)) & 63);
          scb = (float)((s0 >> (8 * jb)) & 63); mnb = (float)((s1 >> (8 * jb)) & 63);
        } else {
          const int ia = ja - 4, ib = jb - 4;
          sca = (float)(((s2 >> (8 * ia)) & 0xF) | (((s0 >> (8 * ia + 6)) & 3) << 4));
          mna = (float)(((s2 >> (8 * ia + 4)) & 0xF) | (((s1 >> (8 * ia + 6)) & 3) << 4));
          scb = (float)(((s2 >> (8 * ib)) & 0xF) | (((s0 >> (8 * ib + 6)) & 3) << 4));
          mnb = (float)(((s2 >> (8 * ib + 4)) & 0xF) | (((s1 >> (8 * ib + 6)) & 3) << 4));
        }
        da[j] = d * sca; db[j] = d * scb; ma[j] = dmin * mna; mb[j] = dmin * mnb;
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int4* xp = (const int4*)(xq + (size_t)(c0 + t) * K + b * 256 + 64 * p);
        const int4 x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3];
        const int xa[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const int xb[8] = {x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
        const float2* ds = xds + (size_t)(c0 + t) * (K / 32) + b * 8 + 2 * p;
        const float2 fa = ds[0], fb = ds[1];
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
          const u32 q[8] = {qa[j].x, qa[j].y, qa[j].z, qa[j].w, qb[j].x, qb[j].y, qb[j].z, qb[j].w};
          int sa = 0, sb = 0;
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            sa = dp4a((int)(q[i] & 0x0F0F0F0Fu), xa[i], sa);
            sb = dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), xb[i], sb);
          }
          acc[j][t] += da[j] * fa.x * (float)sa + db[j] * fb.x * (float)sb - (ma[j] * fa.y + mb[j] * fb.y);
        }
      }
    }
  }
};
)";

// Q6_K repacked per block as [ql 128][qh 64][scales 16] (208 bytes, 16-byte aligned), the half
// d of every block in w2 [rows][NB]. Lane sub-index s: half h = s / 2 of the block, positions
// l in [l0, l0 + 16) with l0 = 16 (s % 2); it owns weights l, l+32, l+64, l+96 of that half.
// The -32 offset goes through the activation's int8 sums (one per group, shared by all rows).
constexpr const char* kQ6K = R"(
template <> struct Mv<KIND_Q6_K> {
  static constexpr bool kPreload = true;
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int NB = K / 256;
    const int s = lane & 3, h = s >> 1, l0 = (s & 1) * 16;
    const int sh = 8 * (l0 >> 4);
#pragma unroll UNR
    for (int b = lane >> 2; b < NB; b += 8) {
      uint4 A[RPW], B[RPW], H[RPW];
      uint2 S[RPW];
      u16 dh[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const u8* blk = w + ((size_t)rr[j] * NB + b) * 208;
        A[j] = ldw16(blk + h * 64 + l0);
        B[j] = ldw16(blk + h * 64 + 32 + l0);
        H[j] = ldw16(blk + 128 + h * 32 + l0);
        S[j] = ldw8(blk + 192 + h * 8);
        dh[j] = ldw2(w2 + ((size_t)rr[j] * NB + b) * 2);
      }
      MV_WAIT();
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const i8* xr = xq + (size_t)(c0 + t) * K + b * 256 + h * 128 + l0;
        const float2* ds = xds + (size_t)(c0 + t) * (K / 32) + b * 8 + h * 4;
        int xv[4][4], sx[4];
        float dx[4];
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          const int4 x = *(const int4*)(xr + 32 * g);
          xv[g][0] = x.x; xv[g][1] = x.y; xv[g][2] = x.z; xv[g][3] = x.w;
          int sum = 0;
#pragma unroll
          for (int i = 0; i < 4; ++i) sum = dp4a(0x01010101, xv[g][i], sum);
          sx[g] = sum;
          dx[g] = ds[g].x;
        }
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
          const u32 a[4] = {A[j].x, A[j].y, A[j].z, A[j].w}, bb[4] = {B[j].x, B[j].y, B[j].z, B[j].w};
          const u32 hh[4] = {H[j].x, H[j].y, H[j].z, H[j].w};
          const float sc[4] = {(float)(i8)(S[j].x >> sh), (float)(i8)(S[j].x >> (sh + 16)),
                               (float)(i8)(S[j].y >> sh), (float)(i8)(S[j].y >> (sh + 16))};
          float part = 0.0f;
#pragma unroll
          for (int g = 0; g < 4; ++g) {
            int dot = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              u32 q;
              if (g == 0) q = (a[i] & 0x0F0F0F0Fu) | ((hh[i] << 4) & 0x30303030u);
              else if (g == 1) q = (bb[i] & 0x0F0F0F0Fu) | ((hh[i] << 2) & 0x30303030u);
              else if (g == 2) q = ((a[i] >> 4) & 0x0F0F0F0Fu) | (hh[i] & 0x30303030u);
              else q = ((bb[i] >> 4) & 0x0F0F0F0Fu) | ((hh[i] >> 2) & 0x30303030u);
              dot = dp4a((int)q, xv[g][i], dot);
            }
            part += sc[g] * dx[g] * (float)(dot - 32 * sx[g]);
          }
          acc[j][t] += h2f(dh[j]) * part;
        }
      }
    }
  }
};
)";

// Q8_0 repacked: int8 [rows][K] and the half d of each block of 32 in w2 [rows][K / 32]. One
// block of 32 per lane per step.
constexpr const char* kQ80 = R"(
template <> struct Mv<KIND_Q8_0> {
  static constexpr bool kPreload = true;
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int NB = K / 32;
#pragma unroll UNR
    for (int b = lane; b < NB; b += 32) {
      uint4 q0[RPW], q1[RPW];
      u16 dh[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const u8* blk = w + (size_t)rr[j] * K + b * 32;
        q0[j] = ldw16(blk);
        q1[j] = ldw16(blk + 16);
        dh[j] = ldw2(w2 + ((size_t)rr[j] * NB + b) * 2);
      }
      MV_WAIT();
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int4* xp = (const int4*)(xq + (size_t)(c0 + t) * K + b * 32);
        const int4 x0 = xp[0], x1 = xp[1];
        const int x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const float dx = xds[(size_t)(c0 + t) * NB + b].x;
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
          const int q[8] = {(int)q0[j].x, (int)q0[j].y, (int)q0[j].z, (int)q0[j].w,
                            (int)q1[j].x, (int)q1[j].y, (int)q1[j].z, (int)q1[j].w};
          int dot = 0;
#pragma unroll
          for (int i = 0; i < 8; ++i) dot = dp4a(q[i], x[i], dot);
          acc[j][t] += h2f(dh[j]) * dx * (float)dot;
        }
      }
    }
  }
};
)";

// 16-bit floats (F16 and BF16): 8 values per lane per step with 16-byte loads when the row
// length allows it (VEC), a scalar tail otherwise. The activation stays f32.
constexpr const char* kHalf = R"(
template <int KIND> struct MvHalf {
  static __device__ __forceinline__ float cvt(u16 v) { return KIND == KIND_F16 ? h2f(v) : bf2f(v); }
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int KV = VEC ? (K / 256) * 256 : 0;
#pragma unroll UNR
    for (int e = lane * 8; e < KV; e += 256) {
      float wf[RPW][8];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const uint4 wv = ldw16((const u16*)w + (size_t)rr[j] * K + e);
        const u32 wp[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) { wf[j][2 * i] = cvt((u16)(wp[i] & 0xffff)); wf[j][2 * i + 1] = cvt((u16)(wp[i] >> 16)); }
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float4* xp = (const float4*)(xf + (size_t)(c0 + t) * K + e);
        const float4 a = xp[0], bq = xp[1];
#pragma unroll
        for (int j = 0; j < RPW; ++j)
          acc[j][t] += wf[j][0] * a.x + wf[j][1] * a.y + wf[j][2] * a.z + wf[j][3] * a.w +
                       wf[j][4] * bq.x + wf[j][5] * bq.y + wf[j][6] * bq.z + wf[j][7] * bq.w;
      }
    }
    for (int e = KV + lane; e < K; e += 32) {
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const float wv = cvt(((const u16*)w)[(size_t)rr[j] * K + e]);
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[j][t] += wv * xf[(size_t)(c0 + t) * K + e];
      }
    }
  }
};
template <> struct Mv<KIND_F16> : MvHalf<KIND_F16> {};
template <> struct Mv<KIND_BF16> : MvHalf<KIND_BF16> {};
template <> struct Mv<KIND_F32> {
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int KV = VEC4 ? (K / 128) * 128 : 0;
#pragma unroll UNR
    for (int e = lane * 4; e < KV; e += 128) {
      uint4 wv[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) wv[j] = ldw16((const float*)w + (size_t)rr[j] * K + e);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float4 a = *(const float4*)(xf + (size_t)(c0 + t) * K + e);
#pragma unroll
        for (int j = 0; j < RPW; ++j)
          acc[j][t] += __uint_as_float(wv[j].x) * a.x + __uint_as_float(wv[j].y) * a.y +
                       __uint_as_float(wv[j].z) * a.z + __uint_as_float(wv[j].w) * a.w;
      }
    }
    for (int e = KV + lane; e < K; e += 32) {
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const float wv = ((const float*)w)[(size_t)rr[j] * K + e];
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[j][t] += wv * xf[(size_t)(c0 + t) * K + e];
      }
    }
  }
};
)";

// The kernel: picks the segment of this CTA, runs its kind's body, reduces and stores.
constexpr const char* kMatvecTail = R"(
// SEG: the segment's index in the launch (the ROPE epilogue: 0 = q, 1 = k, 2 = v).
template <int KIND, int SEG>
__device__ __forceinline__ void mv_segment(const MvSeg& sg, int cta, const MvArgs& a) {
  const int lane = threadIdx.x & 31;
  const int r0 = (cta * 4 + (threadIdx.x >> 5)) * RPW;
  if (r0 >= sg.rows) return;
  const int c0 = blockIdx.y * NT;
  int rr[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) rr[j] = min(r0 + j, sg.rows - 1);  // past the end: reread the last row
  float acc[RPW][NT];
#pragma unroll
  for (int j = 0; j < RPW; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[j][t] = 0.0f;
#if PRELOAD
  if (!MvPreloads<Mv<KIND>>::value) PDL_WAIT();
#endif
  Mv<KIND>::run((const u8*)sg.w, (const u8*)sg.w2, rr, lane, (const i8*)a.xq,
                (const float2*)a.xds, (const float*)a.xf, c0, acc);
#if PRELOAD
  PDL_WAIT();  // lanes without a step of their own; the epilogue reads and writes shared buffers
#if PRELOAD == 2
  PDL_TRIGGER();
#endif
#endif
  float* out = (float*)sg.out;
  float* res = (float*)sg.res;
  float sm[RPW][NT];
#pragma unroll
  for (int j = 0; j < RPW; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) sm[j][t] = warp_sum(acc[j][t]);
#if ROPE
  // The ROPE epilogue (q, k, v of one launch; llama's normal RoPE, RPW even): rows r, r + 1 (r
  // even) of q and k are a rotated pair, both in this warp, rotated here as the rope kernel does
  // (cos/sin of the pair from the step's table [n][n_rot]); k and v rows are also stored in the
  // KV cache (kvrows[t] + koff / voff), so rope_store has nothing left to do.
  if (SEG < 2) {
#pragma unroll
    for (int j = 0; j < RPW; j += 2) {
      const int d = (r0 + j) % a.hd;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (d < a.nrot && c0 + t < a.n) {
          const float* cs = (const float*)a.rope + (size_t)(c0 + t) * a.nrot + d;
          const float c = cs[0], s = cs[1];
          const float x0 = sm[j][t], x1 = sm[j + 1][t];
          sm[j][t] = rope_lo(x0, x1, c, s);
          sm[j + 1][t] = rope_hi(x0, x1, c, s);
        }
      }
    }
  }
#endif
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float s = sm[j][t];
      if (lane == 0 && c0 + t < a.n && r0 + j < sg.rows) {
        const size_t o = (size_t)(c0 + t) * sg.rows + r0 + j;
        out[o] = s;
        if (res) res[o] += s;
#if ROPE
        if (SEG > 0) {
          u8* dst = (u8*)(((const u64*)a.kvrows)[c0 + t] + (SEG == 1 ? a.koff : a.voff));
          if (a.kvf16) ((u16*)dst)[r0 + j] = f2h(s);
          else ((float*)dst)[r0 + j] = s;
        }
#endif
      }
    }
  }
}
// a.total row groups ("CTAs" of 4 warps); a grid smaller than that loops over them (persistent
// CTAs: no launch/tail gap between groups).
template <int KIND>
__device__ __forceinline__ void mv_prefetch(const MvSeg& sg, int cta) {
  const int r0 = (cta * 4 + (threadIdx.x >> 5)) * RPW;
  if (r0 >= sg.rows) return;
  constexpr long long RB = KIND == KIND_Q4_K ? K / 256 * 144 : KIND == KIND_Q6_K ? K / 256 * 208
                         : KIND == KIND_Q8_0 ? K : KIND == KIND_F32 ? 4LL * K : 2LL * K;
  const char* base = (const char*)sg.w + (long long)r0 * RB;
  const long long bytes = RB * min(RPW, sg.rows - r0);
  for (long long off = (long long)(threadIdx.x & 31) * 128; off < bytes; off += 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" :: "l"(base + off));
}
#if SWIGLU
// gate (seg 0) and up (seg 1) with the SwiGLU and its q8 in the epilogue: CTA c (8 warps) owns
// rows [32 c, 32 c + 32) of both matrices, warp w rows 32 c + 4 w .. + 3 (RPW 4), so a q8 block
// of the output is one CTA's. nout = silu(gate) * up (the swiglu kernel's expression), its int8
// blocks to (nq, nds); the raw gate and up values are not written.
extern "C" __global__ void __launch_bounds__(256) matvec_swiglu(const MvArgs a) {
  PDL_TRIGGER();
  PDL_WAIT();
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int rows = a.seg[0].rows;
  const int r0 = blockIdx.x * 32 + w * RPW;
  const int c0 = blockIdx.y * NT;
  int rr[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) rr[j] = r0 + j;  // rows is a multiple of 32
  float ga[RPW][NT], ua[RPW][NT];
#pragma unroll
  for (int j = 0; j < RPW; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) ga[j][t] = ua[j][t] = 0.0f;
  Mv<KIND0>::run((const u8*)a.seg[0].w, (const u8*)a.seg[0].w2, rr, lane, (const i8*)a.xq,
                 (const float2*)a.xds, (const float*)a.xf, c0, ga);
  Mv<KIND1>::run((const u8*)a.seg[1].w, (const u8*)a.seg[1].w2, rr, lane, (const i8*)a.xq,
                 (const float2*)a.xds, (const float*)a.xf, c0, ua);
  __shared__ float hs[NT][32];
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float gv = warp_sum(ga[j][t]), u = warp_sum(ua[j][t]);
      if (lane == 0) hs[t][w * RPW + j] = gv / (1.0f + expf(-gv)) * u;
    }
  }
  __syncthreads();
  if (w < NT && c0 + w < a.n) {
    const int t = c0 + w;
    const float v = hs[w][lane];
    ((float*)a.nout)[(size_t)t * rows + blockIdx.x * 32 + lane] = v;
    q8_block(v, lane, (i8*)a.nq, (float2*)a.nds, (long long)t * (rows / 32) + blockIdx.x);
  }
}
#endif
#if NORM
// The NORM epilogue: after a residual matvec (seg[0].res += W x, one segment, one tile of rows),
// the last CTA to finish (a.cnt counts them; it resets the count) applies the RMSNorm that the
// next matvec's input needs to the updated residual rows and quantizes them, so the separate
// rms_norm_q8 launch goes away. The sum of squares runs in rms_norm_q8's exact order (1024
// virtual threads: this CTA's thread t plays t + 128 m; each real warp reduces one virtual warp
// at a time with the same shuffle tree; the 32 warp partials summed in order), so the bits equal
// rms_norm_q8's. Rows the other CTAs wrote are read through L2 (__ldcg).
__device__ __forceinline__ void mv_norm_row(const MvArgs& a, int t) {
  const int dim = a.ncols, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const float* xr = (const float*)a.seg[0].res + (size_t)t * dim;
  __shared__ double part[32];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    double s = 0.0;
    for (int i = threadIdx.x + 128 * m; i < dim; i += 1024) {
      const float xv = __ldcg(xr + i);
      s += (double)(xv * xv);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) part[4 * m + w] = s;
  }
  __syncthreads();
  double total = 0.0;
  for (int i = 0; i < 32; ++i) total += part[i];
  const float mean = (float)(total / (double)dim);
  const float scale = 1.0f / sqrtf(mean + a.eps);
  // The output and its q8 blocks, one block of 32 per thread (no shuffles; the same values as
  // q8_block: the max and the integer sum do not depend on the order).
  const float* wn = (const float*)a.nw;
  float* yr = (float*)a.nout + (size_t)t * dim;
  const int nb = dim / 32;
  for (int b = threadIdx.x; b < nb; b += 128) {
    float v[32];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i += 4) {
      const float4 x4 = __ldcg((const float4*)(xr + b * 32 + i));
      const float4 w4 = *(const float4*)(wn + b * 32 + i);
      v[i] = x4.x * scale * w4.x; v[i + 1] = x4.y * scale * w4.y;
      v[i + 2] = x4.z * scale * w4.z; v[i + 3] = x4.w * scale * w4.w;
      *(float4*)(yr + b * 32 + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
#pragma unroll
      for (int k = 0; k < 4; ++k) amax = fmaxf(amax, fabsf(v[i + k]));
    }
    const float d = amax / 127.0f;
    float sum = 0.0f;
    u32 packed[8];
#pragma unroll
    for (int i = 0; i < 32; i += 4) {
      u32 p = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int q = amax == 0.0f ? 0 : __float2int_rn(v[i + k] / d);
        sum += (float)q;
        p |= ((u32)(q & 0xff)) << (8 * k);
      }
      packed[i / 4] = p;
    }
    uint4* qd = (uint4*)((i8*)a.nq + ((size_t)t * nb + b) * 32);
    qd[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    qd[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
    ((float2*)a.nds)[(size_t)t * nb + b] = make_float2(d, d * sum);
  }
  __syncthreads();  // part[] is reused by the next row
}
#endif
extern "C" __global__ void __launch_bounds__(128) matvec(const MvArgs a) {
#if PRELOAD != 2
  PDL_TRIGGER();
#endif
  if (PREFETCH && blockIdx.x < a.total) {
    const int cta = blockIdx.x;
#if NSEG > 2
    if (cta >= a.seg[2].cta0) mv_prefetch<KIND2>(a.seg[2], cta - a.seg[2].cta0); else
#endif
#if NSEG > 1
    if (cta >= a.seg[1].cta0) mv_prefetch<KIND1>(a.seg[1], cta - a.seg[1].cta0); else
#endif
    mv_prefetch<KIND0>(a.seg[0], cta);
  }
#if !PRELOAD
  PDL_WAIT();
#endif
  for (int cta = blockIdx.x; cta < a.total; cta += gridDim.x) {
#if NSEG > 2
    if (cta >= a.seg[2].cta0) { mv_segment<KIND2, 2>(a.seg[2], cta - a.seg[2].cta0, a); continue; }
#endif
#if NSEG > 1
    if (cta >= a.seg[1].cta0) { mv_segment<KIND1, 1>(a.seg[1], cta - a.seg[1].cta0, a); continue; }
#endif
    mv_segment<KIND0, 0>(a.seg[0], cta, a);
  }
#if PRELOAD
  PDL_WAIT();  // warps past the last row never reached the waits in mv_segment
#if PRELOAD == 2
  PDL_TRIGGER();
#endif
#endif
#if NORM
  __threadfence();  // this thread's residual stores are visible before the count says so
  __syncthreads();
  __shared__ int mv_last;
  if (threadIdx.x == 0) mv_last = atomicAdd((unsigned*)a.cnt + blockIdx.y, 1u) == gridDim.x - 1;
  __syncthreads();
  if (mv_last) {
    __threadfence();
    const int c0 = blockIdx.y * NT;
    for (int t = 0; t < NT && c0 + t < a.n; ++t) mv_norm_row(a, c0 + t);
    if (threadIdx.x == 0) ((unsigned*)a.cnt)[blockIdx.y] = 0u;
  }
#endif
}
)";

int kind_id(WeightKind kind) {
  switch (kind) {
    case WeightKind::F32: return 0;
    case WeightKind::F16: return 1;
    case WeightKind::BF16: return 2;
    case WeightKind::Q8_0: return 3;
    case WeightKind::Q4_K: return 4;
    case WeightKind::Q6_K: return 5;
    default: return format_kind_id(kind);  // weight_formats.h
  }
}
int64_t row_multiple(WeightKind kind) {
  switch (kind) {
    case WeightKind::Q4_K:
    case WeightKind::Q6_K: return 256;
    case WeightKind::Q8_0: return 32;
    default: return is_format_kind(kind) ? format_row_multiple(kind) : 1;
  }
}
}  // namespace

std::string MatvecSpec::name() const {
  std::string s = "matvec";
  for (int i = 0; i < nseg; ++i) s += fmt::format("{}{}", i ? "+" : " ", weight_kind_name(kinds[i]));
  if (norm) s += " norm";
  if (rope) s += " rope";
  if (swiglu) s += " swiglu";
  if (ids) s += " ids";
  if (preload) s += " preload";
  return s + fmt::format(" k={} nt={} rpw={} unroll={}", k, nt, rpw, unroll);
}

std::string matvec_source(const MatvecSpec& spec) {
  if (spec.nt < 1 || spec.nt > kMaxMatvecTile)
    throw_error("matvec: tile of {} activation rows is not in [1, {}]", spec.nt, kMaxMatvecTile);
  if (spec.nseg < 1 || spec.nseg > 3) throw_error("matvec: {} matrices in one launch (1 to 3)", spec.nseg);
  if (spec.rpw < 1 || spec.rpw > 8) throw_error("matvec: {} rows per warp is not in [1, 8]", spec.rpw);
  if (spec.unroll < 1 || spec.unroll > 64) throw_error("matvec: unroll {} is not in [1, 64]", spec.unroll);
  if (spec.preload && (spec.norm || spec.swiglu))
    throw_error("matvec: the preload goes without the norm/swiglu epilogues");
  if (spec.norm && spec.nseg != 1)
    throw_error("matvec: the norm epilogue takes one matrix, not {}", spec.nseg);
  if (spec.rope && (spec.nseg != 3 || spec.rpw % 2 != 0))
    throw_error("matvec: the rope epilogue takes q, k, v and an even number of rows per warp");
  if (spec.swiglu && (spec.nseg != 2 || spec.rpw != 4 || spec.nt > 8))
    throw_error("matvec: the swiglu epilogue takes gate and up, 4 rows per warp, tiles of <= 8");
  if (spec.ids && (spec.nt > 8 || spec.norm || spec.rope || spec.preload))
    throw_error("matvec: the indexed kernels take tiles of <= 8 activation rows and no epilogue");
  const int64_t k = spec.k;
  std::string defs = fmt::format(
      "#define K {}\n#define NT {}\n#define RPW {}\n#define UNR {}\n#define NSEG {}\n#define VEC {}\n"
      "#define VEC4 {}\n#define PREFETCH {}\n#define PRELOAD {}\n",
      k, spec.nt, spec.rpw, spec.unroll, spec.nseg, k % 8 == 0 ? 1 : 0, k % 4 == 0 ? 1 : 0,
      0, spec.preload ? 2 : 0);  // (PREFETCH 0, PRELOAD 2: the text's values since its other modes went)
  std::string bodies;
  bool q4k = false, q6k = false, q80 = false;
  for (int i = 0; i < spec.nseg; ++i) {
    const WeightKind kind = spec.kinds[i];
    const int64_t multiple = row_multiple(kind);
    if (k <= 0 || k % multiple != 0)
      throw_error("matvec {}: row length {} is not a positive multiple of {}",
                  weight_kind_name(kind), k, multiple);
    defs += fmt::format("#define KIND{} {}\n", i, kind_id(kind));
    q4k |= kind == WeightKind::Q4_K;
    q6k |= kind == WeightKind::Q6_K;
    q80 |= kind == WeightKind::Q8_0;
  }
  defs += fmt::format("#define NORM {}\n#define ROPE {}\n#define SWIGLU {}\n", spec.norm ? 1 : 0,
                      spec.rope ? 1 : 0, spec.swiglu ? 1 : 0);
  if (q4k) {
    bodies += kQ4K;
    // Read by no kernel since the Q4_K variant that took steps in flight was removed; kept, as
    // the value the host passed, so every source and its cache key stay as they were.
    defs += fmt::format("#define Q4ST {}\n", spec.nt == 1 && !spec.swiglu ? 4 : 2);
  }
  if (q6k) bodies += kQ6K;
  if (q80) bodies += kQ80;
  bodies += format_matvec_bodies(spec);  // the block formats of weight_formats.h (plug-in)
  return defs + kernel_prelude() + kMatvecHead + kHalf + bodies + kMatvecTail +
         (spec.ids ? matvec_ids_text() : "");
}

std::string matvec_source(WeightKind kind, int64_t k, int nt) {
  MatvecSpec spec;
  spec.kinds[0] = kind;
  spec.k = k;
  spec.nt = nt;
  return matvec_source(spec);
}

}  // namespace jitllm::cuda
