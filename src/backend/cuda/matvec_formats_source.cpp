// CUDA C++ text of the matvec bodies (Mv<KIND> specializations, see matvec_source.cpp) for the
// block formats of weight_formats.h: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (blocks of 32) and
// Q5_K, Q3_K, Q2_K (super-blocks of 256), in the card layouts documented there.
//
// Arithmetic as the Q4_K / Q6_K / Q8_0 bodies: the activation is int8 blocks of 32 with
// (d, d * sum) (quantize_q8); the weight's quants are unpacked to int8 lanes of a u32 (nibbles,
// plus the fifth / third bit, or through IQ4_NL's / MXFP4's 16-entry tables with three byte
// permutes), dp4a'd against the activation, and scaled in f32 per (sub-)block; offsets and mins
// go through the activation's block sums (ds.y for groups of 32, a dp4a row sum for groups of 16).
// Each warp owns RPW rows; all weight loads of a step (16-byte quants, the small aux records) are
// issued for all RPW rows before any arithmetic, and the weights are unpacked once per step, not
// once per activation row.
#include <fmt/format.h>

#include <utility>

#include "backend/cuda/weight_formats.h"
#include "quant/formats.h"

namespace jitllm::cuda {

namespace {

// Helpers shared by the bodies below (emitted once per source).
constexpr const char* kCommon = R"(
#define KIND_Q4_0 6
#define KIND_Q4_1 7
#define KIND_Q5_0 8
#define KIND_Q5_1 9
#define KIND_Q5_K 10
#define KIND_Q3_K 11
#define KIND_Q2_K 12
#define KIND_IQ4_NL 13
#define KIND_MXFP4 14
__device__ __forceinline__ u32 ldw4(const void* p) {
  u32 v;
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ u32 ldw1(const void* p) {
  u32 v;
  asm volatile("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
// Bits 0..3 of v to bit 0 of bytes 0..3 (the four shifted copies do not overlap: no carries).
__device__ __forceinline__ u32 spread4(u32 v) { return ((v & 0xFu) * 0x00204081u) & 0x01010101u; }
// MXFP4's scale: 2^(e - 128) as the CPU reference's e8m0_half (subnormal for e < 2).
__device__ __forceinline__ float e8m0_half(u32 e) {
  return __uint_as_float(e < 2 ? (0x00200000u << e) : (e - 1) << 23);
}
// Four indices (one per byte, 0..15) -> the four int8 table entries: byte permutes over entries
// 0..7 and 8..15 (selector bit 3 masked: prmt would read it as a sign-replicate flag), then a
// permute that takes each byte from the half its index's bit 3 names.
template <int KIND> __device__ __forceinline__ u32 lut16(u32 n) {
  const u32 t0 = KIND == KIND_IQ4_NL ? IQ4NL_T0 : MXFP4_T0, t1 = KIND == KIND_IQ4_NL ? IQ4NL_T1 : MXFP4_T1;
  const u32 t2 = KIND == KIND_IQ4_NL ? IQ4NL_T2 : MXFP4_T2, t3 = KIND == KIND_IQ4_NL ? IQ4NL_T3 : MXFP4_T3;
  const u32 v = n | (n >> 4);
  const u32 sel = (v & 0xFFu) | ((v >> 8) & 0xFF00u);  // byte i's index in nibble i
  const u32 lo = __byte_perm(t0, t1, sel & 0x7777u), hi = __byte_perm(t2, t3, sel & 0x7777u);
  return __byte_perm(lo, hi, 0x3210u | ((sel & 0x8888u) >> 1));
}
)";

// Blocks of 32 (one per lane per step; a warp reads 512 contiguous bytes of quants per row).
// Quants qs[16]: element j in the low nibble of byte j, j + 16 in the high nibble, so the low
// nibbles of u32 word i are elements 4i..4i+3 and the high ones 16+4i..16+4i+3. Aux record per
// block (weight_formats.h): Q4_0 / IQ4_NL half d; Q4_1 (d, m); Q5_0 / Q5_1 (qh, d, m); MXFP4 e.
// value = s * q' + m per element with q' the int8 lane value: the block contributes
// s * dx * dot + m * (dx * sum x) = s * ds.x * dot + m * ds.y.
constexpr const char* kBlock32 = R"(
template <int KIND> struct Mv32 {
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int NB = K / 32;
    constexpr bool Q5 = KIND == KIND_Q5_0 || KIND == KIND_Q5_1;
    constexpr bool LUT = KIND == KIND_IQ4_NL || KIND == KIND_MXFP4;
#pragma unroll UNR
    for (int b = lane; b < NB; b += 32) {
      uint4 q[RPW];
      uint2 au[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const size_t bi = (size_t)rr[j] * NB + b;
        q[j] = ldw16(w + bi * 16);
        if (Q5) au[j] = ldw8(w2 + bi * 8);
        else if (KIND == KIND_Q4_1) au[j] = make_uint2(ldw4(w2 + bi * 4), 0u);
        else if (KIND == KIND_MXFP4) au[j] = make_uint2(ldw1(w2 + bi), 0u);
        else au[j] = make_uint2((u32)ldw2(w2 + bi * 2), 0u);
      }
      u32 lo[RPW][4], hi[RPW][4];
      float sc[RPW], mn[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const u32 qw[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          u32 l = qw[i] & 0x0F0F0F0Fu, h = (qw[i] >> 4) & 0x0F0F0F0Fu;
          if (Q5) {
            l |= spread4(au[j].x >> (4 * i)) << 4;
            h |= spread4(au[j].x >> (16 + 4 * i)) << 4;
          }
          if (LUT) { l = lut16<KIND>(l); h = lut16<KIND>(h); }
          lo[j][i] = l;
          hi[j][i] = h;
        }
        if (KIND == KIND_Q4_0) { sc[j] = h2f((u16)au[j].x); mn[j] = -8.0f * sc[j]; }
        else if (KIND == KIND_Q4_1) { sc[j] = h2f((u16)au[j].x); mn[j] = h2f((u16)(au[j].x >> 16)); }
        else if (KIND == KIND_Q5_0) { sc[j] = h2f((u16)au[j].y); mn[j] = -16.0f * sc[j]; }
        else if (KIND == KIND_Q5_1) { sc[j] = h2f((u16)au[j].y); mn[j] = h2f((u16)(au[j].y >> 16)); }
        else if (KIND == KIND_IQ4_NL) { sc[j] = h2f((u16)au[j].x); mn[j] = 0.0f; }
        else { sc[j] = e8m0_half(au[j].x); mn[j] = 0.0f; }
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int4* xp = (const int4*)(xq + (size_t)(c0 + t) * K + b * 32);
        const int4 x0 = xp[0], x1 = xp[1];
        const int xa[4] = {x0.x, x0.y, x0.z, x0.w}, xb[4] = {x1.x, x1.y, x1.z, x1.w};
        const float2 ds = xds[(size_t)(c0 + t) * NB + b];
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
          int dot = 0;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            dot = dp4a((int)lo[j][i], xa[i], dot);
            dot = dp4a((int)hi[j][i], xb[i], dot);
          }
          acc[j][t] += sc[j] * ds.x * (float)dot + (LUT ? 0.0f : mn[j] * ds.y);
        }
      }
    }
  }
};
)";

// Q5_K as stored (176-byte blocks: half d, half dmin, scales[12], qh[32], qs[128]). As the Q4_K
// body: four lanes per block, lane p owns qs[32p, 32p + 32) (sub-blocks 2p in the low nibbles,
// 2p + 1 in the high ones) and reads all of qh, whose bits 2p and 2p + 1 are those sub-blocks'
// fifth bits.
constexpr const char* kQ5K = R"(
template <> struct Mv<KIND_Q5_K> {
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int NB = K / 256;
    const int p = lane & 3, ja = 2 * p, jb = 2 * p + 1;
#pragma unroll UNR
    for (int b = lane >> 2; b < NB; b += 8) {
      uint4 hd[RPW], ha[RPW], hb[RPW], qa[RPW], qb[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const u8* blk = w + ((size_t)rr[j] * NB + b) * 176;
        hd[j] = ldw16(blk);
        ha[j] = ldw16(blk + 16);
        hb[j] = ldw16(blk + 32);
        qa[j] = ldw16(blk + 48 + 32 * p);
        qb[j] = ldw16(blk + 64 + 32 * p);
      }
      float da[RPW], db[RPW], ma[RPW], mb[RPW];
      u32 la[RPW][8], lb[RPW][8];
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
        const u32 q[8] = {qa[j].x, qa[j].y, qa[j].z, qa[j].w, qb[j].x, qb[j].y, qb[j].z, qb[j].w};
        const u32 h[8] = {ha[j].x, ha[j].y, ha[j].z, ha[j].w, hb[j].x, hb[j].y, hb[j].z, hb[j].w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          la[j][i] = (q[i] & 0x0F0F0F0Fu) | (((h[i] >> ja) & 0x01010101u) << 4);
          lb[j][i] = ((q[i] >> 4) & 0x0F0F0F0Fu) | (((h[i] >> jb) & 0x01010101u) << 4);
        }
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
          int sa = 0, sb = 0;
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            sa = dp4a((int)la[j][i], xa[i], sa);
            sb = dp4a((int)lb[j][i], xb[i], sb);
          }
          acc[j][t] += da[j] * fa.x * (float)sa + db[j] * fb.x * (float)sb - (ma[j] * fa.y + mb[j] * fb.y);
        }
      }
    }
  }
};
)";

// Q3_K and Q2_K repacked (weight_formats.h): [qs 64][hmask 32][int8 scales - 32, 16] = 112 bytes
// plus half d apart, and [qs 64][scales 16] = 80 bytes plus (d, dmin) apart. Both are 16 groups
// of 16: byte l of the 32-byte chunk qs[32h ..] holds element 128h + 32g + l in bits 2g, 2g + 1
// (g = 0..3), scale index 8h + 2g + l / 16, and for Q3_K the third bit is bit 4h + g of hmask[l].
// Four lanes per block: lane s takes half h = s / 2 and l in [l0, l0 + 16), l0 = 16 (s % 2), so
// its four groups' scales are bytes 2g + s % 2 of the 8 at 8h. Offsets (Q3_K's -4) and mins
// (Q2_K) need the activation's sums over groups of 16: one dp4a row sum per group, shared by
// every weight row.
constexpr const char* kQ3KQ2K = R"(
template <int KIND> struct MvK16 {
  static __device__ __forceinline__ void run(const u8* __restrict__ w, const u8* __restrict__ w2,
      const int (&rr)[RPW], int lane, const i8* __restrict__ xq, const float2* __restrict__ xds,
      const float* __restrict__ xf, int c0, float (&acc)[RPW][NT]) {
    constexpr int NB = K / 256;
    constexpr bool Q3 = KIND == KIND_Q3_K;
    constexpr int RB = Q3 ? 112 : 80, SO = Q3 ? 96 : 64;  // record bytes, offset of the scales
    const int s = lane & 3, h = s >> 1, l0 = (s & 1) * 16;
    const int sh = 8 * (s & 1);
#pragma unroll UNR
    for (int b = lane >> 2; b < NB; b += 8) {
      uint4 Q[RPW], H[RPW];
      uint2 S[RPW];
      u32 D[RPW];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const size_t bi = (size_t)rr[j] * NB + b;
        const u8* blk = w + bi * RB;
        Q[j] = ldw16(blk + 32 * h + l0);
        if (Q3) H[j] = ldw16(blk + 64 + l0);
        S[j] = ldw8(blk + SO + 8 * h);
        D[j] = Q3 ? (u32)ldw2(w2 + bi * 2) : ldw4(w2 + bi * 4);
      }
      u32 qv[RPW][4][4];
      float dl[RPW][4], ml[RPW][4];
#pragma unroll
      for (int j = 0; j < RPW; ++j) {
        const u32 qq[4] = {Q[j].x, Q[j].y, Q[j].z, Q[j].w};
        const u32 sb[4] = {S[j].x >> sh, S[j].x >> (sh + 16), S[j].y >> sh, S[j].y >> (sh + 16)};
        const float d = h2f((u16)D[j]);
#pragma unroll
        for (int g = 0; g < 4; ++g) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            u32 v = (qq[i] >> (2 * g)) & 0x03030303u;
            if (Q3) {
              const u32 hw = i == 0 ? H[j].x : i == 1 ? H[j].y : i == 2 ? H[j].z : H[j].w;
              v |= ((hw >> (4 * h + g)) & 0x01010101u) << 2;
            }
            qv[j][g][i] = v;
          }
          if (Q3) {
            dl[j][g] = d * (float)(i8)(sb[g] & 0xFF);
            ml[j][g] = 4.0f * dl[j][g];  // value = dl (q - 4)
          } else {
            dl[j][g] = d * (float)(sb[g] & 0xF);
            ml[j][g] = h2f((u16)(D[j] >> 16)) * (float)((sb[g] >> 4) & 0xF);
          }
        }
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const i8* xr = xq + (size_t)(c0 + t) * K + b * 256 + h * 128 + l0;
        const float2* ds = xds + (size_t)(c0 + t) * (K / 32) + b * 8 + h * 4;
        int xv[4][4];
        float dx[4], sxf[4];
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          const int4 x = *(const int4*)(xr + 32 * g);
          xv[g][0] = x.x; xv[g][1] = x.y; xv[g][2] = x.z; xv[g][3] = x.w;
          int sum = 0;
#pragma unroll
          for (int i = 0; i < 4; ++i) sum = dp4a(0x01010101, xv[g][i], sum);
          dx[g] = ds[g].x;
          sxf[g] = (float)sum;
        }
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
          float part = 0.0f;
#pragma unroll
          for (int g = 0; g < 4; ++g) {
            int dot = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) dot = dp4a((int)qv[j][g][i], xv[g][i], dot);
            part += dx[g] * (dl[j][g] * (float)dot - ml[j][g] * sxf[g]);
          }
          acc[j][t] += part;
        }
      }
    }
  }
};
)";

// The 16-entry tables as four little-endian u32 words each, made from the CPU reference's tables.
std::string table_defines() {
  std::string s;
  auto words = [&](const char* name, const int8_t* t) {
    for (int w = 0; w < 4; ++w) {
      uint32_t v = 0;
      for (int b = 0; b < 4; ++b) v |= uint32_t(uint8_t(t[4 * w + b])) << (8 * b);
      s += fmt::format("#define {}_T{} 0x{:08x}u\n", name, w, v);
    }
  };
  words("IQ4NL", kValuesIQ4NL);
  words("MXFP4", kValuesMXFP4);
  return s;
}

}  // namespace

std::string format_matvec_bodies(const MatvecSpec& spec) {
  bool seen[16] = {};
  bool any = false;
  for (int i = 0; i < spec.nseg; ++i) {
    const WeightKind kind = spec.kinds[i];
    if (!is_format_kind(kind)) continue;
    seen[int(kind)] = any = true;
  }
  if (!any) return "";
  std::string s = table_defines() + kCommon;
  const bool b32 = seen[int(WeightKind::Q4_0)] || seen[int(WeightKind::Q4_1)] ||
                   seen[int(WeightKind::Q5_0)] || seen[int(WeightKind::Q5_1)] ||
                   seen[int(WeightKind::IQ4_NL)] || seen[int(WeightKind::MXFP4)];
  if (b32) s += kBlock32;
  const std::pair<WeightKind, const char*> b32_kinds[] = {
      {WeightKind::Q4_0, "KIND_Q4_0"}, {WeightKind::Q4_1, "KIND_Q4_1"},
      {WeightKind::Q5_0, "KIND_Q5_0"}, {WeightKind::Q5_1, "KIND_Q5_1"},
      {WeightKind::IQ4_NL, "KIND_IQ4_NL"}, {WeightKind::MXFP4, "KIND_MXFP4"}};
  for (const auto& [k, id] : b32_kinds)
    if (seen[int(k)]) s += fmt::format("template <> struct Mv<{0}> : Mv32<{0}> {{}};\n", id);
  if (seen[int(WeightKind::Q5_K)]) s += kQ5K;
  if (seen[int(WeightKind::Q3_K)] || seen[int(WeightKind::Q2_K)]) {
    s += kQ3KQ2K;
    if (seen[int(WeightKind::Q3_K)]) s += "template <> struct Mv<KIND_Q3_K> : MvK16<KIND_Q3_K> {};\n";
    if (seen[int(WeightKind::Q2_K)]) s += "template <> struct Mv<KIND_Q2_K> : MvK16<KIND_Q2_K> {};\n";
  }
  return s;
}

}  // namespace jitllm::cuda
