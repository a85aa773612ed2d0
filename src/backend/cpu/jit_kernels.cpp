// JitKernels: dispatch of matmuls to generated kernels (activation packing, row split across the
// pool on 16-row boundaries so threads never share an output cache line, cache blocking of the
// prefill GEMM), the kernel cache, and the reference fallback for everything else.
#include "backend/cpu/jit_kernels.h"

#include <algorithm>
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
    pool.parallel_for(rows, kRowChunk, [&](int64_t r0, int64_t r1) {
      const jit::MatArgs a{weights + size_t(r0) * stride, int64_t(stride), r1 - r0, act, out + r0,
                           out_stride};
      fn(&a);
    });
    return;
  }

  const jit::TileShape ts = jit::gemm_tile(type, isa_, k);
  std::vector<jit::MatFn> fns(size_t(ts.tokens) + 1);  // fns[T]: kernel for T tokens
  for (int t = 1; t <= ts.tokens; ++t) fns[size_t(t)] = mat_kernel({type, k, ts.rows, t, isa_}).fn();
  pool.parallel_for(rows, kRowChunk, [&](int64_t r0, int64_t r1) {
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

void JitKernels::swiglu(const float* gate, const float* up, float* out, int64_t count) const {
  ref_.swiglu(gate, up, out, count);
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
