// The process-wide cache of the K-quant kernels (jit_kquant_matmul.h), their activation layout,
// and matmul_k_quants: activation packing (the Q8_K packer of jit_act.cpp) cached per thread, so q/k/v and
// gate/up quantize their shared input once; rows handed out in 16-row multiples (threads never
// share an output cache line); the prefill GEMM blocked so a thread's weight rows stay in L1
// while a block of tokens stays in L2.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cpu/jit_pack_cache.h"
#include "backend/cpu/jit_row_split.h"
#include "backend/cpu/jit_kquant_matmul.h"
#include "backend/cpu/jit_matmul.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

// The last packed activation of this thread (see PackCache); one packing for all K formats.
const uint8_t* packed_activation(const float* x, int64_t k, int64_t n, const KqActLayout& al,
                                 ThreadPool& pool) {
  thread_local PackCache cache;
  return cache.get(0, x, k, n, al.bytes * size_t(n), [&](uint8_t* dst) {
    if (n == 1) return kq_pack_activation(x, k, 1, dst);
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      kq_pack_activation(x + t0 * k, k, t1 - t0, dst + size_t(t0) * al.bytes);
    });
  });
}


struct KeyHash {
  size_t operator()(const KqKey& k) const {
    size_t h = size_t(k.type);
    h = h * 1000003u ^ size_t(k.k);
    h = h * 1000003u ^ size_t(k.rows * 64 + k.tokens);
    return h * 1000003u ^ size_t(k.isa);
  }
};

constexpr int64_t kRowChunk = 16;    // rows per GEMM kernel call (their weights stay in L1)
constexpr int64_t kTokenBlock = 64;  // tokens per pass over a thread's rows (activations in L2)

}  // namespace

bool kq_supported(QuantType type) {
  return type == QuantType::Q2_K || type == QuantType::Q3_K || type == QuantType::Q5_K;
}

KqActLayout kq_act_layout(int64_t k) {
  KqActLayout l;
  l.k = k;
  l.qs = 0;
  l.d = pad64(size_t(k));
  l.s16 = l.d + pad64(size_t(k / kQK_K) * 4);
  l.bytes = l.s16 + pad64(size_t(k / 16) * 2);
  return l;
}

void kq_pack_activation(const float* x, int64_t k, int64_t n, uint8_t* dst) {
  if (k <= 0 || k % kQK_K != 0) throw_error("k-quant activation: k {} is not a multiple of 256", k);
  // The GEMM's generated Q8_K packer, writing this record (no per-32 plane).
  const KqActLayout kl = kq_act_layout(k);
  ActLayout l;
  l.k = k;
  l.qs = kl.qs;
  l.d = kl.d;
  l.s32 = ActLayout::kNoPlane;
  l.s16 = kl.s16;
  l.bytes = kl.bytes;
  pack_q8k_activation(l, x, n, dst);
}

const KqKernel& kq_kernel(const KqKey& key) {
  static std::mutex mutex;
  static std::unordered_map<KqKey, std::unique_ptr<KqKernel>, KeyHash> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<KqKernel>(key);
  return *slot;
}

bool matmul_k_quants(Isa isa, QuantType type, const uint8_t* weights, int64_t rows, int64_t k,
                     const float* x, int64_t n, float* out) {
  if (!kq_supported(type) || k <= 0 || k % kQK_K != 0) return false;
  if (n <= 0 || rows <= 0) return true;
  const KqActLayout al = kq_act_layout(k);
  ThreadPool& pool = ThreadPool::global();
  const uint8_t* act = packed_activation(x, k, n, al, pool);
  const int64_t stride = int64_t(row_bytes(type, k));
  const int64_t out_stride = rows * int64_t(sizeof(float));

  if (n == 1) {
    const KqTile ts = kq_decode_tile(type, isa);
    const KqFn fn = kq_kernel({type, k, ts.rows, 1, isa}).fn();
    dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 8), [&](int64_t r0, int64_t r1) {
      const KqArgs a{weights + r0 * stride, stride, r1 - r0, act, out + r0, out_stride};
      fn(&a);
    });
    return true;
  }

  const KqTile ts = kq_gemm_tile(type, isa);
  std::vector<KqFn> fns(size_t(ts.tokens) + 1);  // fns[T]: the kernel for T tokens
  for (int t = 1; t <= ts.tokens; ++t) fns[size_t(t)] = kq_kernel({type, k, ts.rows, t, isa}).fn();
  dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 4), [&](int64_t r0, int64_t r1) {
    for (int64_t tb = 0; tb < n; tb += kTokenBlock) {
      const int64_t te = std::min(n, tb + kTokenBlock);
      for (int64_t rc = r0; rc < r1; rc += kRowChunk) {
        const int64_t nr = std::min(kRowChunk, r1 - rc);
        for (int64_t t = tb; t < te; t += ts.tokens) {
          const int64_t nt = std::min<int64_t>(ts.tokens, te - t);
          const KqArgs a{weights + rc * stride, stride, nr, act + size_t(t) * al.bytes,
                         out + t * rows + rc, out_stride};
          fns[size_t(nt)](&a);
        }
      }
    }
  });
  return true;
}

}  // namespace jitllm::jit
