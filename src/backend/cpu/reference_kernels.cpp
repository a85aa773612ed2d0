// Reference (plain C++) CPU kernels: matmul, row gather, RMSNorm, RoPE, SwiGLU, add, K/V stores.
// Attention lives in reference_attention.cpp. Threads split output rows; every output element is
// computed by one thread in a fixed order, so results do not depend on the thread count.
#include "backend/cpu/reference_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace jitllm {

namespace {

constexpr int kLanes = 16;

float reduce_lanes(float* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int i = 0; i < width; ++i) acc[i] += acc[i + width];
  return acc[0];
}


}  // namespace

namespace {

// ggml_vec_dot_* order (x86 AVX-512 build): 4 accumulators of 16 lanes over steps of 64, fused
// multiply-adds, accumulators added pairwise, lanes reduced pairwise; the tail (n % 64) added in
// double. `load` converts element i of a row to float.
template <typename LA, typename LB>
float dot_vec_order(LA la, LB lb, int64_t n) {
  float acc[4][kLanes] = {};
  const int64_t np = n & ~int64_t(63);
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < kLanes; ++l) {
        const int64_t e = i + j * kLanes + l;
        acc[j][l] = std::fma(la(e), lb(e), acc[j][l]);
      }
  for (int l = 0; l < kLanes; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (int l = 0; l < kLanes; ++l) acc[0][l] += acc[1][l];
  double sum = reduce_lanes(acc[0]);
  for (int64_t i = np; i < n; ++i) sum += double(la(i) * lb(i));
  return float(sum);
}

// llamafile tinyBLAS order (what llama.cpp uses for matmuls of 2+ activation rows when k is a
// multiple of 16): one 16-lane accumulator, fused multiply-adds, lanes reduced pairwise.
template <typename LA, typename LB>
float dot_gemm_order(LA la, LB lb, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(la(i + l), lb(i + l), acc[l]);
  float sum = reduce_lanes(acc);
  for (; i < n; ++i) sum = std::fma(la(i), lb(i), sum);
  return sum;
}

// ggml's dot of a 32-weight block format with a Q8_0 activation on x86 (AVX2/AVX-512:
// ggml_vec_dot_{q8_0,q4_0}_q8_0 for one activation row and tinyBLAS_Q0_AVX for several, which sum
// in the same order): 8 float lanes; per block, lane l takes the integer sum of elements
// 4l..4l+3, scaled by d_w * d_a with a fused multiply-add; the lanes are then reduced as
// (l, l + 4), (0, 2) + (1, 3), 0 + 1. The scalar order (one float per block) differs in the last
// bit, which a later Q8_0 rounding can turn into a whole quant step.
// `unpack(block, q)` writes a weight block's 32 int8 levels and returns its fp16 scale bits.
template <size_t kBlockBytes, typename Unpack>
float dot_block32_q8_0_ggml(const uint8_t* w, const uint8_t* a, int64_t nb, Unpack unpack) {
  constexpr size_t kActBlock = 2 + 32;  // Q8_0: fp16 scale, 32 int8
  float acc[8] = {};
  int8_t qw[32];
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ba = a + size_t(i) * kActBlock;
    const uint16_t hw = unpack(w + size_t(i) * kBlockBytes, qw);
    uint16_t ha;
    std::memcpy(&ha, ba, 2);
    const float d = fp16_to_f32(hw) * fp16_to_f32(ha);
    const auto* qa = reinterpret_cast<const int8_t*>(ba + 2);
    for (int l = 0; l < 8; ++l) {
      int isum = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) isum += int(qw[j]) * int(qa[j]);
      acc[l] = std::fma(d, float(isum), acc[l]);
    }
  }
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  acc[0] += acc[2];
  acc[1] += acc[3];
  return acc[0] + acc[1];
}

uint16_t unpack_q8_0(const uint8_t* b, int8_t* q) {  // fp16 d, 32 int8
  uint16_t h;
  std::memcpy(&h, b, 2);
  std::memcpy(q, b + 2, 32);
  return h;
}

uint16_t unpack_q4_0(const uint8_t* b, int8_t* q) {  // fp16 d, 16 bytes: j low, j + 16 high
  uint16_t h;
  std::memcpy(&h, b, 2);
  for (int j = 0; j < 16; ++j) {
    q[j] = int8_t((b[2 + j] & 0x0F) - 8);
    q[j + 16] = int8_t((b[2 + j] >> 4) - 8);
  }
  return h;
}

// ggml's BF16 x BF16 dots in an AVX512_BF16 build. Both are built on VDPBF16PS, whose lane j
// adds the product of elements 2j+1, then that of 2j, each addition rounded (the products of two
// bf16 are exact in f32). tinyBLAS (2+ activation rows, k % 32 == 0): one 16-lane accumulator
// over steps of 32, lanes reduced pairwise. ggml_vec_dot_bf16 (one row): two accumulators over
// steps of 64 (elements i..i+31 and i+32..i+63), each reduced pairwise and added in double, the
// tail (n % 64) in double.
void dpbf16_step(float* acc, const uint16_t* a, const uint16_t* b) {  // 32 elements, 16 lanes
  for (int l = 0; l < kLanes; ++l) {
    acc[l] += bf16_to_f32(a[2 * l + 1]) * bf16_to_f32(b[2 * l + 1]);
    acc[l] += bf16_to_f32(a[2 * l]) * bf16_to_f32(b[2 * l]);
  }
}

float dot_bf16_gemm_order(const uint16_t* a, const uint16_t* b, int64_t n) {
  float acc[kLanes] = {};
  for (int64_t i = 0; i + 32 <= n; i += 32) dpbf16_step(acc, a + i, b + i);
  return reduce_lanes(acc);
}

float dot_bf16_vec_order(const uint16_t* a, const uint16_t* b, int64_t n) {
  float c1[kLanes] = {}, c2[kLanes] = {};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    dpbf16_step(c1, a + i, b + i);
    dpbf16_step(c2, a + i + 32, b + i + 32);
  }
  double sum = double(reduce_lanes(c1));
  sum += double(reduce_lanes(c2));
  for (; i < n; ++i) sum += double(bf16_to_f32(a[i]) * bf16_to_f32(b[i]));
  return float(sum);
}

auto f32_at(const float* p) {
  return [p](int64_t i) { return p[i]; };
}
auto f16_at(const uint16_t* p) {
  return [p](int64_t i) { return fp16_to_f32(p[i]); };
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  return dot_gemm_order(f32_at(a), f32_at(b), n);
}
float dot_f16_f16(const uint16_t* a, const uint16_t* b, int64_t n) {
  return dot_gemm_order(f16_at(a), f16_at(b), n);
}
float dot_f32_vec(const float* a, const float* b, int64_t n) {
  return dot_vec_order(f32_at(a), f32_at(b), n);
}
float dot_f16_f16_vec(const uint16_t* a, const uint16_t* b, int64_t n) {
  return dot_vec_order(f16_at(a), f16_at(b), n);
}

void ReferenceKernels::matmul(QuantType type, const uint8_t* weights, int64_t rows, int64_t k,
                              const float* x, int64_t n, float* out) const {
  if (n <= 0 || rows <= 0) return;
  const size_t w_row_bytes = row_bytes(type, k);
  ThreadPool& pool = ThreadPool::global();
  // Rows per task: enough work per chunk to amortise the dispatch, small enough to balance.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * n));

  // llama.cpp computes float matmuls of one activation row with ggml_vec_dot_* and those of
  // several rows with tinyBLAS (when k is a multiple of 16); the two sum in different orders,
  // and reproducing the order keeps the results bit-identical.
  // tinyBLAS also needs the weight rows to split in tiles of 4; otherwise ggml falls back to
  // vec_dot.
  const bool gemm_order = n >= 2 && k % kLanes == 0 && rows % 4 == 0;
  const bool bf16_gemm = n >= 2 && k % 32 == 0 && rows % 4 == 0;  // tinyBLAS<32> for BF16
  if (type == QuantType::F32) {
    pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = r0; r < r1; ++r) {
          const auto* w = reinterpret_cast<const float*>(weights + r * w_row_bytes);
          out[t * rows + r] = gemm_order ? dot_f32(w, x + t * k, k) : dot_f32_vec(w, x + t * k, k);
        }
    });
    return;
  }

  // The activation is converted once per token to the weight format's vec_dot_type (llama.cpp
  // does the same before its dot products; for F16 weights that is an F16 rounding of x).
  const QuantType act_type = quant_traits(type).vec_dot_type;
  const size_t act_row_bytes = row_bytes(act_type, k);
  std::vector<uint8_t> act(act_row_bytes * size_t(n));
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* dst = act.data() + size_t(t) * act_row_bytes;
      if (act_type == QuantType::F16) {
        auto* h = reinterpret_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < k; ++i) h[i] = f32_to_fp16(x[t * k + i]);
      } else {
        quantize_activation(type, x + t * k, dst, k);
      }
    }
  });

  pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* a = act.data() + size_t(t) * act_row_bytes;
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* w = weights + r * w_row_bytes;
        if (type == QuantType::F16) {
          const auto* w16 = reinterpret_cast<const uint16_t*>(w);
          const auto* a16 = reinterpret_cast<const uint16_t*>(a);
          out[t * rows + r] = gemm_order ? dot_f16_f16(w16, a16, k) : dot_f16_f16_vec(w16, a16, k);
        } else if (type == QuantType::BF16) {
          const auto* w16 = reinterpret_cast<const uint16_t*>(w);
          const auto* a16 = reinterpret_cast<const uint16_t*>(a);
          out[t * rows + r] = bf16_gemm ? dot_bf16_gemm_order(w16, a16, k)
                                        : dot_bf16_vec_order(w16, a16, k);
        } else if (type == QuantType::Q8_0) {
          out[t * rows + r] = dot_block32_q8_0_ggml<34>(w, a, k / 32, unpack_q8_0);
        } else if (type == QuantType::Q4_0) {
          out[t * rows + r] = dot_block32_q8_0_ggml<18>(w, a, k / 32, unpack_q4_0);
        } else {
          out[t * rows + r] = vec_dot(type, k, w, a);
        }
      }
    }
  });
}

void ReferenceKernels::get_rows(QuantType type, const uint8_t* table, int64_t k,
                                const int32_t* ids, int64_t n, float* out) const {
  const size_t rb = row_bytes(type, k);
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* row = table + size_t(ids[t]) * rb;
    if (type == QuantType::F32)
      std::memcpy(out + t * k, row, size_t(k) * sizeof(float));
    else
      dequantize_row(type, row, out + t * k, k);
  }
}

void ReferenceKernels::rms_norm(const float* x, const float* w, int64_t n, int64_t dim, float eps,
                                float* out) const {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float* yr = out + t * dim;
    // Squares summed in double (as ggml does), the mean and scale in float.
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += double(xr[i] * xr[i]);
    const float mean = float(sum / double(dim));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * w[i];
  }
}

void ReferenceKernels::rope(float* x, int64_t n, int n_heads, int head_dim, const int32_t* pos,
                            const RopeParams& p) const {
  if (p.n_rot <= 0 || p.n_rot > head_dim || p.n_rot % 2 != 0)
    throw_error("rope: n_rot {} must be even and in (0, head_dim {}]", p.n_rot, head_dim);
  float corr[2] = {0, 0};
  if (p.ext_factor != 0.0f)
    yarn_corr_dims(p, corr);
  std::vector<float> cache(size_t(p.n_rot));
  for (int64_t t = 0; t < n; ++t) {
    rope_cache(float(pos[t]), p, corr, cache.data());
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      // Dimensions past n_rot (partial rotary) pass through unchanged.
      for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
        const float c = cache[i0], s = cache[i0 + 1];
        const int a = p.mode == RopeMode::Normal ? i0 : i0 / 2;
        const int b = p.mode == RopeMode::Normal ? i0 + 1 : i0 / 2 + p.n_rot / 2;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

float ggml_vec_expf(float x) {
  if (std::isnan(x)) return x;
  // exp(x) = 2^n * exp(b), n = round(x / ln 2) by the 1.5 * 2^23 shifter, b = x - n ln 2 in two
  // parts, exp(b) by a degree-5 polynomial; out of range (|n| > 192) saturates to 0 or inf.
  const float shifter = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shifter);
  const float n = z - shifter;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return std::ldexp(j, int(n));  // scalef: exact scaling, rounded only when subnormal
}

float ggml_vec_silu(float x) { return x / (1.0f + ggml_vec_expf(0.0f - x)); }

void ReferenceKernels::swiglu(const float* gate, const float* up, float* out,
                              int64_t count) const {
  // ggml's SIMD silu, not libm's expf: the two differ by an ulp on some inputs, and on rows with
  // large activations (a trained model's BOS row) that ulp can move a Q8_0/F16 rounding of the
  // next matmul's activation, which costs ~0.04 in the logits.
  for (int64_t i = 0; i < count; ++i) out[i] = ggml_vec_silu(gate[i]) * up[i];
}

void ReferenceKernels::add(float* acc, const float* x, int64_t count) const {
  for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
}

void ReferenceKernels::store_rows(QuantType type, const float* src, int64_t n, int64_t dim,
                                  uint8_t* const* dst) const {
  for (int64_t t = 0; t < n; ++t) {
    if (type == QuantType::F32) {
      std::memcpy(dst[t], src + t * dim, size_t(dim) * sizeof(float));
    } else if (type == QuantType::F16) {
      auto* h = reinterpret_cast<uint16_t*>(dst[t]);
      for (int64_t i = 0; i < dim; ++i) h[i] = f32_to_fp16(src[t * dim + i]);
    } else {
      throw_error("KV cache type {} is not supported (f16 or f32)", quant_name(type));
    }
  }
}

const CpuKernels& reference_kernels() {
  static const ReferenceKernels kernels;
  return kernels;
}

}  // namespace jitllm
