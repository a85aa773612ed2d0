// JitKernels: dispatch of matmuls to generated kernels (activation packing, row split across the
// pool on 16-row boundaries so threads never share an output cache line, cache blocking of the
// prefill GEMM), the kernel cache, and the reference fallback for everything else.
#include "backend/cpu/jit_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

constexpr int64_t kRowChunk = 16;    // rows per kernel call in the GEMM (weights stay in L1)
constexpr int64_t kTokenBlock = 64;  // tokens per pass over a thread's rows (activations in L2)

// The last packed activation of this thread, reused when the next matmul gets the same floats
// for a format with the same packing (q/k/v share their input, so do gate/up): comparing the
// floats costs less than quantizing them again.
struct PackCache {
  int family = -1;
  int64_t k = 0, n = 0;
  std::vector<float> x;
  AlignedPtr<uint8_t> buf;
  size_t cap = 0;
};

int pack_family(QuantType t) {
  // K formats share one packing (Q8_K quants + both sum planes); 32-block formats differ in bias.
  return t == QuantType::Q4_K || t == QuantType::Q6_K ? 1000 : int(t);
}

const uint8_t* packed_activation(QuantType type, jit::Isa isa, const float* x, int64_t k,
                                 int64_t n, const jit::ActLayout& al, ThreadPool& pool) {
  thread_local PackCache c;
  const size_t floats = size_t(n) * size_t(k);
  const int family = pack_family(type) * 8 + int(isa);  // Q8_0's bias depends on the ISA
  if (c.family == family && c.k == k && c.n == n &&
      std::memcmp(c.x.data(), x, floats * sizeof(float)) == 0)
    return c.buf.get();
  const size_t bytes = al.bytes * size_t(n);
  if (bytes > c.cap) {
    c.cap = std::max(bytes, c.cap * 2);
    c.buf = make_aligned<uint8_t>(c.cap, 64);
  }
  c.family = -1;  // invalid until packed
  uint8_t* dst = c.buf.get();
  pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    jit::pack_activation(type, isa, x + t0 * k, k, t1 - t0, dst + size_t(t0) * al.bytes);
  });
  c.x.assign(x, x + floats);
  c.family = family;
  c.k = k;
  c.n = n;
  return dst;
}

// Rows handed out in chunks (multiples of 16 rows, so no output cache line is shared) from an
// atomic counter: a thread slowed down by anything else on its core takes fewer chunks instead
// of holding up the others at the end of a static split.
void dynamic_rows(ThreadPool& pool, int64_t rows, int64_t chunk,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  if (pool.size() == 1 || n_chunks == 1) return fn(0, rows);
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < n_chunks;)
      fn(c * chunk, std::min(rows, (c + 1) * chunk));
  });
}

int64_t row_chunk(int64_t rows, int threads, int64_t per_thread) {
  const int64_t c = rows / (int64_t(threads) * per_thread) / 16 * 16;
  return std::max<int64_t>(16, c);
}

const char* isa_kernel_name(jit::Isa isa) {
  switch (isa) {
    case jit::Isa::Avx2: return "jit-avx2";
    case jit::Isa::AvxVnni: return "jit-avxvnni";
    case jit::Isa::Avx512Vnni: return "jit-avx512";
  }
  return "jit";
}

}  // namespace

size_t JitKernels::KeyHash::operator()(const jit::MatKey& k) const {
  size_t h = size_t(k.type);
  h = h * 1000003u ^ size_t(k.k);
  h = h * 1000003u ^ size_t(k.rows * 64 + k.tokens);
  h = h * 1000003u ^ size_t(k.isa);
  return h;
}

JitKernels::JitKernels(jit::Isa isa)
    : isa_(isa), name_(isa_kernel_name(isa)), ref_(reference_kernels()) {
  if (!jit::cpu_supports(isa)) throw_error("jit kernels: this CPU cannot run {}", jit::isa_name(isa));
}

const jit::MatKernel& JitKernels::mat_kernel(const jit::MatKey& key) const {
  std::lock_guard lock(mutex_);
  auto& slot = cache_[key];
  if (!slot) slot = std::make_unique<jit::MatKernel>(key);
  return *slot;
}

void JitKernels::matmul(QuantType type, const uint8_t* weights, int64_t rows, int64_t k,
                        const float* x, int64_t n, float* out) const {
  if (n <= 0 || rows <= 0) return;
  if (!jit::jit_matmul_supported(type) || k % quant_traits(type).block_elems != 0 ||
      (type != QuantType::Q8_0 && type != QuantType::Q4_0 && k % 256 != 0))
    return ref_.matmul(type, weights, rows, k, x, n, out);

  const jit::ActLayout al = jit::act_layout(type, k);
  ThreadPool& pool = ThreadPool::global();
  const uint8_t* act = packed_activation(type, isa_, x, k, n, al, pool);
  const size_t stride = row_bytes(type, k);
  const int64_t out_stride = rows * int64_t(sizeof(float));

  if (n == 1) {
    const jit::TileShape ts = jit::decode_tile(type, isa_, k);
    const jit::MatFn fn = mat_kernel({type, k, ts.rows, 1, isa_}).fn();
    dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 8), [&](int64_t r0, int64_t r1) {
      const jit::MatArgs a{weights + size_t(r0) * stride, int64_t(stride), r1 - r0, act, out + r0,
                           out_stride};
      fn(&a);
    });
    return;
  }

  const jit::TileShape ts = jit::gemm_tile(type, isa_, k);
  std::vector<jit::MatFn> fns(size_t(ts.tokens) + 1);  // fns[T]: kernel for T tokens
  for (int t = 1; t <= ts.tokens; ++t) fns[size_t(t)] = mat_kernel({type, k, ts.rows, t, isa_}).fn();
  dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 4), [&](int64_t r0, int64_t r1) {
    for (int64_t tb = 0; tb < n; tb += kTokenBlock) {
      const int64_t te = std::min(n, tb + kTokenBlock);
      for (int64_t rc = r0; rc < r1; rc += kRowChunk) {
        const int64_t nr = std::min(kRowChunk, r1 - rc);
        for (int64_t t = tb; t < te; t += ts.tokens) {
          const int64_t nt = std::min<int64_t>(ts.tokens, te - t);
          const jit::MatArgs a{weights + size_t(rc) * stride, int64_t(stride), nr,
                               act + size_t(t) * al.bytes, out + t * rows + rc, out_stride};
          fns[size_t(nt)](&a);
        }
      }
    }
  });
}

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


const CpuKernels& jit_kernels() {
  static const JitKernels kernels(jit::selected_isa());
  return kernels;
}

const CpuKernels& cpu_kernels_by_name(const std::string& name) {
  if (name == "jit") return jit_kernels();
  if (name == "reference" || name == "ref") return reference_kernels();
  throw_error("kernels '{}': unknown (jit or reference)", name);
}

const CpuKernels& default_cpu_kernels() {
  const char* env = std::getenv("JITLLM_KERNELS");
  if (env && *env) return cpu_kernels_by_name(env);
  return jit::cpu_supports(jit::Isa::Avx2) ? jit_kernels() : reference_kernels();
}

}  // namespace jitllm
