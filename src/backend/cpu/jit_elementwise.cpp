// JitKernels' element-wise ops, vectorized (AVX2 + F16C) and bit-identical to the reference:
// SwiGLU, the residual add, and K/V row stores (f32 -> f16). Large calls are split over the
// pool in chunks of whole 64-byte lines, so two threads never write the same cache line.
// (RMSNorm and RoPE: jit_norm_rope.cpp; row lookups: jit_get_rows.cpp.) AVX-512 would not pay
// here: these ops stream memory and AVX2 already keeps up with the caches.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/jit_kernels.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

// Below this many elements (256 KiB of floats) a call runs on the caller alone: it takes a few
// microseconds, not enough to amortise handing it to the pool (decode's rows all stay here).
constexpr int64_t kPoolMinElems = 65536;

// ggml_vec_silu(g) * u for 8 lanes, the reference's operations in the same order (so the same
// bits): ggml's expf polynomial, then an exact ldexp. Where exp(-g) < 2^-125, 1 + exp(-g) is 1
// whatever its bits, so those lanes need no subnormal-exact scaling; |n| > 192 saturates as in
// the reference.
__m256 swiglu8(__m256 g, __m256 u) {
  const __m256 x = _mm256_sub_ps(_mm256_setzero_ps(), g);
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter);
  const __m256 n = _mm256_sub_ps(z, shifter);
  const __m256 nn = _mm256_sub_ps(_mm256_setzero_ps(), n);
  const __m256 b = _mm256_fmadd_ps(nn, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                   _mm256_fmadd_ps(nn, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 uu = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), uu,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      uu, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  // j * 2^n as (j * 2^lo) * 2^hi: lo = clamp(n, -125, 127), hi = clamp(n - 127, 0, 100); both
  // factors are normal powers of two, so the result is rounded once (or overflows) like ldexp.
  auto pow2 = [](__m256 k) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
  };
  const __m256 lo = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-125.0f)), _mm256_set1_ps(127.0f));
  const __m256 hi = _mm256_min_ps(_mm256_max_ps(_mm256_sub_ps(n, _mm256_set1_ps(127.0f)),
                                                _mm256_setzero_ps()),
                                  _mm256_set1_ps(100.0f));
  __m256 ex = _mm256_mul_ps(_mm256_mul_ps(j, pow2(lo)), pow2(hi));
  ex = _mm256_blendv_ps(ex, _mm256_setzero_ps(), _mm256_cmp_ps(n, _mm256_set1_ps(-125.0f), _CMP_LT_OQ));
  ex = _mm256_blendv_ps(ex, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(n, _mm256_set1_ps(192.0f), _CMP_GT_OQ));
  const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), ex));
  return _mm256_mul_ps(silu, u);
}

}  // namespace

void JitKernels::swiglu(const float* gate, const float* up, float* out, int64_t count) const {
  auto run = [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      // NaN lanes: the reference's path (rare; keeps NaN handling identical).
      if (_mm256_movemask_ps(_mm256_cmp_ps(g, g, _CMP_UNORD_Q)) != 0) {
        for (int64_t t = i; t < i + 8; ++t) out[t] = ggml_vec_silu(gate[t]) * up[t];
        continue;
      }
      _mm256_storeu_ps(out + i, swiglu8(g, _mm256_loadu_ps(up + i)));
    }
    for (; i < i1; ++i) out[i] = ggml_vec_silu(gate[i]) * up[i];
  };
  if (count < kPoolMinElems) return run(0, count);
  ThreadPool::global().parallel_for(count, 4096, run);
}

void JitKernels::add(float* acc, const float* x, int64_t count) const {
  auto run = [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 32 <= i1; i += 32)
      for (int u = 0; u < 32; u += 8)
        _mm256_storeu_ps(acc + i + u, _mm256_add_ps(_mm256_loadu_ps(acc + i + u),
                                                    _mm256_loadu_ps(x + i + u)));
    for (; i + 8 <= i1; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(x + i)));
    for (; i < i1; ++i) acc[i] += x[i];
  };
  if (count < kPoolMinElems) return run(0, count);
  ThreadPool::global().parallel_for(count, 4096, run);  // 16 KiB chunks: whole cache lines
}

void JitKernels::store_rows(QuantType type, const float* src, int64_t n, int64_t dim,
                            uint8_t* const* dst) const {
  if (type != QuantType::F16 && type != QuantType::F32)
    throw_error("KV cache type {} is not supported (f16 or f32)", quant_name(type));
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* s = src + t * dim;  // [dim]
      if (type == QuantType::F32) {
        std::memcpy(dst[t], s, size_t(dim) * sizeof(float));
        continue;
      }
      auto* h = reinterpret_cast<uint16_t*>(dst[t]);  // [dim] f16
      int64_t i = 0;
      // F16C's round to nearest even is what f32_to_fp16 does (NaNs included).
      for (; i + 8 <= dim; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
      for (; i < dim; ++i) h[i] = f32_to_fp16(s[i]);
    }
  };
  // Rows land in different pages of the KV cache: split by rows.
  if (n * dim < kPoolMinElems) return run(0, n);
  ThreadPool::global().parallel_for(n, 1, run);
}

}  // namespace jitllm
