// JitKernels' element-wise ops: SwiGLU vectorized bit-identically to the reference; the others
// (row lookups, RMSNorm, RoPE, residual add, KV row stores) still run the reference kernels.
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/jit_kernels.h"
#include "core/thread_pool.h"

namespace jitllm {

void JitKernels::get_rows(QuantType type, const uint8_t* table, int64_t k, const int32_t* ids,
                          int64_t n, float* out) const {
  ref_.get_rows(type, table, k, ids, n, out);
}

void JitKernels::rms_norm(const float* x, const float* w, int64_t n, int64_t dim, float eps,
                          float* out) const {
  ref_.rms_norm(x, w, n, dim, eps, out);
}

void JitKernels::rope(float* x, int64_t n, int n_heads, int head_dim, const int32_t* pos,
                      const RopeParams& params) const {
  ref_.rope(x, n, n_heads, head_dim, pos, params);
}

namespace {

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
  if (count < 65536) return run(0, count);
  ThreadPool::global().parallel_for(count, 4096, run);
}

void JitKernels::add(float* acc, const float* x, int64_t count) const { ref_.add(acc, x, count); }

void JitKernels::store_rows(QuantType type, const float* src, int64_t n, int64_t dim,
                            uint8_t* const* dst) const {
  ref_.store_rows(type, src, n, dim, dst);
}


}  // namespace jitllm
