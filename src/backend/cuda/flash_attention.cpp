// Flash attention for prefill (see flash_attention.h): the generated kernel and its launch.
#include "backend/cuda/flash_attention.h"

#include <cmath>

#include "core/error.h"

namespace jitllm::cuda {

namespace {

// Shared-memory rows are HD + 8 halves long: 16-byte aligned for ldmatrix, and the 8 rows one
// ldmatrix phase reads start 4 banks apart, so the reads are conflict-free.
constexpr const char* kFlash = R"(
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;
#define NEG_INF __int_as_float(0xff800000)
#define BM 64
#define BN 64
#define LDS (HD + 8)

__device__ __forceinline__ u32 pack_h2(float lo, float hi) {
  u16 a, b;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(a) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(hi));
  return (u32)a | ((u32)b << 16);
}
__device__ __forceinline__ float lo_f(u32 h2) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)(h2 & 0xffff))); return f;
}
__device__ __forceinline__ float hi_f(u32 h2) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)(h2 >> 16))); return f;
}
__device__ __forceinline__ void mma16816(float* c, const u32* a, u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm_x4(const u16* p, u32& r0, u32& r1, u32& r2, u32& r3) {
  const u32 s = (u32)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(const u16* p, u32& r0, u32& r1, u32& r2, u32& r3) {
  const u32 s = (u32)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
}
// 16 bytes global -> shared; bytes = 0 writes zeros (keys past the tile's last one).
__device__ __forceinline__ void cp16(u16* dst, const void* src, int bytes) {
  const u32 s = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(src), "r"(bytes));
}

extern "C" __global__ void __launch_bounds__(128)
flash_attention(const float* __restrict__ q, float* __restrict__ out,
                const u64* __restrict__ pages, const int* __restrict__ row_pt,
                const int* __restrict__ n_kv, const int2* __restrict__ tiles, u64 koff, u64 voff,
                int page_tokens, int row_bytes, int n_head, int group, float scale_log2,
                int window, float softcap, const float* __restrict__ sinks) {
  __shared__ __align__(16) u16 ks[BN * LDS];  // [key][dim] f16
  __shared__ __align__(16) u16 vs[BN * LDS];
  const int2 tile = tiles[blockIdx.x];
  const int row0 = tile.x, count = tile.y;
  const int h = blockIdx.y, hk = h / group;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
  const u64* pt = pages + row_pt[row0];
  int nk_max = 0, k_min = 0x7fffffff;  // keys any row of the tile sees, and the first of them
  for (int i = 0; i < count; ++i) {
    nk_max = max(nk_max, n_kv[row0 + i]);
    k_min = min(k_min, window > 0 ? max(0, n_kv[row0 + i] - window) : 0);
  }
  // This lane's two rows of the warp's 16: ra (fragment rows g) and rb (g + 8), keys [k0, nk).
  const int ra = warp * 16 + g, rb = ra + 8;
  const int nka = ra < count ? n_kv[row0 + ra] : 0, nkb = rb < count ? n_kv[row0 + rb] : 0;
  const int k0a = window > 0 ? nka - window : 0, k0b = window > 0 ? nkb - window : 0;
  // Q as the A operand, [HD / 16 k-steps][4 registers of two halves]. PRECISE: qf is the f16
  // rounding of Q and ql the f16 rounding of what is left (Q - qf), so S = qf K^T + ql K^T
  // carries Q to ~22 bits (the reference keeps Q in f32; K is f16 in the cache anyway).
  u32 qf[HD / 16][4];
#if PRECISE
  u32 ql[HD / 16][4];
#endif
  {
    const float* qa = q + ((size_t)(row0 + ra) * n_head + h) * HD;
    const float* qb = q + ((size_t)(row0 + rb) * n_head + h) * HD;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const int c = kk * 16 + tg * 2;
      float2 a0 = make_float2(0.f, 0.f), a2 = a0, b0 = a0, b2 = a0;
      if (ra < count) { a0 = *(const float2*)(qa + c); a2 = *(const float2*)(qa + c + 8); }
      if (rb < count) { b0 = *(const float2*)(qb + c); b2 = *(const float2*)(qb + c + 8); }
      qf[kk][0] = pack_h2(a0.x, a0.y);
      qf[kk][1] = pack_h2(b0.x, b0.y);
      qf[kk][2] = pack_h2(a2.x, a2.y);
      qf[kk][3] = pack_h2(b2.x, b2.y);
#if PRECISE
      ql[kk][0] = pack_h2(a0.x - lo_f(qf[kk][0]), a0.y - hi_f(qf[kk][0]));
      ql[kk][1] = pack_h2(b0.x - lo_f(qf[kk][1]), b0.y - hi_f(qf[kk][1]));
      ql[kk][2] = pack_h2(a2.x - lo_f(qf[kk][2]), a2.y - hi_f(qf[kk][2]));
      ql[kk][3] = pack_h2(b2.x - lo_f(qf[kk][3]), b2.y - hi_f(qf[kk][3]));
#endif
    }
  }
  float o[HD / 8][4];
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
  const size_t head_off = (size_t)hk * HD * 2;
  for (int kv0 = k_min / BN * BN; kv0 < nk_max; kv0 += BN) {
    for (int c = threadIdx.x; c < BN * (HD / 8); c += 128) {
      const int r = c / (HD / 8), part = c % (HD / 8), p = kv0 + r;
      const bool ok = p < nk_max;
      const u8* base = (const u8*)pt[ok ? p / page_tokens : 0] +
                       (size_t)(ok ? p % page_tokens : 0) * row_bytes + head_off + part * 16;
      cp16(&ks[r * LDS + part * 8], base + koff, ok ? 16 : 0);
      cp16(&vs[r * LDS + part * 8], base + voff, ok ? 16 : 0);
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    // S = Q K^T for this warp's 16 rows and 64 keys: 8 n-tiles of 8 keys.
    float s[BN / 8][4];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < BN / 16; ++nn) {
        u32 b0, b1, b2, b3;
        ldsm_x4(&ks[(nn * 16 + ((lane >> 4) << 3) + (lane & 7)) * LDS + kk * 16 + ((lane >> 3) & 1) * 8],
                b0, b1, b2, b3);
        mma16816(s[2 * nn], qf[kk], b0, b1);
        mma16816(s[2 * nn + 1], qf[kk], b2, b3);
#if PRECISE
        mma16816(s[2 * nn], ql[kk], b0, b1);
        mma16816(s[2 * nn + 1], ql[kk], b2, b3);
#endif
      }
    }
    // Mask, scale (log2 domain), online softmax. Element e of n-tile j: row e < 2 ? ra : rb,
    // key kv0 + 8j + 2tg + (e & 1).
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kv0 + j * 8 + tg * 2 + (e & 1);
        const bool seen = e < 2 ? key < nka && key >= k0a : key < nkb && key >= k0b;
        float v = s[j][e] * scale_log2;
        // Soft-capping in the natural-log domain: cap * tanh(score / cap), score = v / log2 e.
        if (softcap > 0.0f) v = softcap * tanhf(v * (0.6931471805599453f / softcap)) * 1.4426950408889634f;
        v = seen ? v : NEG_INF;
        s[j][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
    float mu[2], corr[2], ls[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      mu[i] = mx[i] == NEG_INF ? 0.f : mx[i];  // a row with no key yet: keep everything at 0
      corr[i] = exp2f(m[i] - mu[i]);
      m[i] = mx[i];
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[j][e] - mu[e >> 1]);
        s[j][e] = p;
        ls[e >> 1] += p;
      }
    l[0] = l[0] * corr[0] + ls[0];
    l[1] = l[1] * corr[1] + ls[1];
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) {
      o[d][0] *= corr[0]; o[d][1] *= corr[0];
      o[d][2] *= corr[1]; o[d][3] *= corr[1];
    }
    // O += P V: P's accumulator layout of two key n-tiles is the A operand of one k-step.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const u32 a[4] = {pack_h2(s[2 * kk][0], s[2 * kk][1]), pack_h2(s[2 * kk][2], s[2 * kk][3]),
                        pack_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                        pack_h2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#if PRECISE
      // P's f16 rounding is the larger error (P in [0, 1], 11 bits): its remainder as a second
      // A operand.
      const u32 al[4] = {
          pack_h2(s[2 * kk][0] - lo_f(a[0]), s[2 * kk][1] - hi_f(a[0])),
          pack_h2(s[2 * kk][2] - lo_f(a[1]), s[2 * kk][3] - hi_f(a[1])),
          pack_h2(s[2 * kk + 1][0] - lo_f(a[2]), s[2 * kk + 1][1] - hi_f(a[2])),
          pack_h2(s[2 * kk + 1][2] - lo_f(a[3]), s[2 * kk + 1][3] - hi_f(a[3]))};
#endif
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        u32 b0, b1, b2, b3;
        ldsm_x4_t(&vs[(kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDS + dn * 16 + (lane >> 4) * 8],
                  b0, b1, b2, b3);
        mma16816(o[2 * dn], a, b0, b1);
        mma16816(o[2 * dn + 1], a, b2, b3);
#if PRECISE
        mma16816(o[2 * dn], al, b0, b1);
        mma16816(o[2 * dn + 1], al, b2, b3);
#endif
      }
    }
    __syncthreads();  // the next block overwrites ks / vs
  }
  float f[2] = {1.f, 1.f};  // gpt-oss's sink rescales the rows it becomes the maximum of
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    if (sinks) {  // one more logit (log2 units like m) with no value
      const float s2 = sinks[h] * 1.4426950408889634f;
      if (s2 > m[i]) {
        f[i] = m[i] == NEG_INF ? 0.f : exp2f(m[i] - s2);
        l[i] = l[i] * f[i] + 1.f;
      } else {
        l[i] += exp2f(s2 - m[i]);
      }
    }
    l[i] = l[i] > 0.f ? f[i] / l[i] : 0.f;
  }
  if (ra < count) {
    float* oa = out + ((size_t)(row0 + ra) * n_head + h) * HD + tg * 2;
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) *(float2*)(oa + d * 8) = make_float2(o[d][0] * l[0], o[d][1] * l[0]);
  }
  if (rb < count) {
    float* ob = out + ((size_t)(row0 + rb) * n_head + h) * HD + tg * 2;
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) *(float2*)(ob + d * 8) = make_float2(o[d][2] * l[1], o[d][3] * l[1]);
  }
}
)";

}  // namespace

bool flash_supported(int head_dim, bool kv_f16) {
  return kv_f16 && head_dim > 0 && head_dim <= 128 && head_dim % 16 == 0;
}

std::vector<FlashTile> flash_tiles(std::span<const int32_t> row_seq) {
  std::vector<FlashTile> tiles;
  for (size_t i = 0; i < row_seq.size(); ++i) {
    if (tiles.empty() || row_seq[i] != row_seq[i - 1] || tiles.back().count == kFlashTileRows)
      tiles.push_back(FlashTile{int32_t(i), 0});
    ++tiles.back().count;
  }
  return tiles;
}

std::string flash_attention_source(int head_dim) {
  if (!flash_supported(head_dim, true))
    throw_error("flash attention: head size {} is not a multiple of 16 in [16, 128]", head_dim);
  // (The text keeps its PRECISE branches, defined 1, since the single-f16 variant was removed,
  // so every source and its cache key stay as they were.)
  return fmt::format("#define HD {}\n#define PRECISE 1\n", head_dim) + kFlash;
}

void FlashAttention::run(const CudaKernels::AttentionCall& a, CUdeviceptr tiles, int n_tiles,
                         const Stream& s) {
  if (!flash_supported(a.head_dim, a.kv_f16))
    throw_error("flash attention: head size {} with {} KV is not supported", a.head_dim,
                a.kv_f16 ? "f16" : "f32");
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    throw_error("flash attention: {} query heads do not group over {} KV heads", a.n_head,
                a.n_head_kv);
  if (n_tiles <= 0) return;
  auto it = fns_.find(a.head_dim);
  if (it == fns_.end()) {
    const Module& m = compiler_.module(flash_attention_source(a.head_dim),
                                       fmt::format("flash attention head_dim={}", a.head_dim));
    it = fns_.emplace(a.head_dim, m.function("flash_attention")).first;
  }
  CUdeviceptr q = a.q, out = a.out, pages = a.pages, row_pt = a.row_pt, n_kv = a.n_kv, t = tiles;
  unsigned long long koff = a.koff, voff = a.voff;
  int pt = a.page_tokens, rb = a.row_bytes, nh = a.n_head, group = a.n_head / a.n_head_kv;
  float scale_log2 = a.scale * 1.4426950408889634f;  // exp(x) = exp2(x log2 e)
  float softcap = a.softcap;
  int window = a.window;
  CUdeviceptr sinks = a.sinks;
  void* args[] = {&q, &out, &pages, &row_pt, &n_kv, &t, &koff, &voff, &pt, &rb, &nh, &group,
                  &scale_log2, &window, &softcap, &sinks};
  launch(it->second, unsigned(n_tiles), unsigned(a.n_head), 1, 128, 0, s, args, "flash_attention");
}

}  // namespace jitllm::cuda
