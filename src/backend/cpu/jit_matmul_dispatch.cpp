// JitKernels::matmul: dispatch of matmuls to generated decode/GEMM kernels: activation packing
// (cached per thread, so q/k/v and gate/up quantize their shared input once), rows split across
// the pool in chunks of 16-row multiples so threads never share an output cache line, and cache
// blocking of the prefill GEMM. Formats without an emitter fall back to the reference.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <vector>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_pack_cache.h"
#include "backend/cpu/jit_row_split.h"
#include "backend/cpu/jit_formats.h"
#include "backend/cpu/jit_kernels.h"
#include "backend/cpu/jit_matvec.h"
#include "backend/cpu/jit_repack.h"
#include "backend/cpu/jit_kquant_matmul.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

constexpr int64_t kRowChunk = 16;    // rows per kernel call in the GEMM (weights stay in L1)
constexpr int64_t kTokenBlock = 64;  // tokens per pass over a thread's rows (activations in L2)

// Fewest tokens for the AMX tiles, which unpack every panel once per call: below, the AVX-512
// tiles are faster (bench_amx_gemm GemmFew, 2048 x 2048 on 2 threads of the AMX Xeon: Q4_K 16
// tokens 332 us AMX vs 382 AVX-512, 8 tokens 303 vs 192; Q8_0 16 tokens 605 vs 479).
int64_t amx_min_tokens(QuantType type) {
  return type == QuantType::Q8_0 || type == QuantType::Q4_0 ? 32 : 16;
}

int pack_family(QuantType t) {
  // K formats share one packing (Q8_K quants + both sum planes); 32-block formats differ in bias.
  return t == QuantType::Q4_K || t == QuantType::Q6_K ? 1000 : int(t);
}

const uint8_t* packed_activation(QuantType type, jit::Isa isa, const float* x, int64_t k,
                                 int64_t n, const jit::ActLayout& al, ThreadPool& pool) {
  thread_local jit::PackCache cache;
  const int family = pack_family(type) * 8 + int(isa);  // Q8_0's bias depends on the ISA
  return cache.get(family, x, k, n, al.bytes * size_t(n), [&](uint8_t* dst) {
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      jit::pack_activation(type, isa, x + t0 * k, k, t1 - t0, dst + size_t(t0) * al.bytes);
    });
  });
}


}  // namespace

void JitKernels::matmul(QuantType type, const uint8_t* weights, int64_t rows, int64_t k,
                        const float* x, int64_t n, float* out) const {
  if (n <= 0 || rows <= 0) return;
  if (jit::matmul_k_quants(isa_, type, weights, rows, k, x, n, out)) return;  // Q2_K, Q3_K, Q5_K
  if (jit::matmul_other_formats(isa_, type, weights, rows, k, x, n, out)) return;  // jit_formats.h
  if (!jit::jit_matmul_supported(type) || k % quant_traits(type).block_elems != 0 ||
      (type != QuantType::Q8_0 && type != QuantType::Q4_0 && k % 256 != 0))
    return ref_.matmul(type, weights, rows, k, x, n, out);
  if (n == 1 && jit::matvec_supported(type, isa_, k)) {  // decode kernels: jit_matvec.h
    const jit::MatvecTarget t{type, weights, rows, out};
    return jit::matvec_group(isa_, {&t, 1}, k, x, ThreadPool::global());
  }

  const jit::ActLayout al = jit::act_layout(type, k);
  ThreadPool& pool = ThreadPool::global();
  const uint8_t* act = packed_activation(type, isa_, x, k, n, al, pool);
  if (amx_ && n >= amx_min_tokens(type) && jit::amx_supported(type, k))
    return jit::amx_gemm({type, k, weights, int64_t(row_bytes(type, k))}, rows, act, n, out, pool);
  const size_t stride = row_bytes(type, k);
  const int64_t out_stride = rows * int64_t(sizeof(float));

  if (n == 1) {
    const jit::TileShape ts = jit::decode_tile(type, isa_, k);
    const jit::MatFn fn = mat_kernel({type, k, ts.rows, 1, isa_}).fn();
    jit::dynamic_rows(pool, rows, jit::row_chunk(rows, pool.size(), 8), [&](int64_t r0, int64_t r1) {
      const jit::MatArgs a{weights + size_t(r0) * stride, int64_t(stride), r1 - r0, act, out + r0,
                           out_stride};
      fn(&a);
    });
    return;
  }

  const jit::TileShape ts = jit::gemm_tile(type, isa_, k);
  std::vector<jit::MatFn> fns(size_t(ts.tokens) + 1);  // fns[T]: kernel for T tokens
  for (int t = 1; t <= ts.tokens; ++t) fns[size_t(t)] = mat_kernel({type, k, ts.rows, t, isa_}).fn();
  jit::dynamic_rows(pool, rows, jit::row_chunk(rows, pool.size(), 4), [&](int64_t r0, int64_t r1) {
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

void JitKernels::matmul_group(std::span<const MatmulTarget> mats, int64_t k, const float* x,
                              int64_t n) const {
  // Decode: all rows of all matrices in one work list over the pool (jit_matvec.h).
  if (n == 1 && std::all_of(mats.begin(), mats.end(), [&](const MatmulTarget& m) {
        return jit::matvec_supported(m.type, isa_, k);
      })) {
    std::vector<jit::MatvecTarget> ts;
    ts.reserve(mats.size());
    for (const MatmulTarget& m : mats)
      ts.push_back({m.type, m.weights, m.rows, m.out,
                    dynamic_cast<const jit::RepackedMatrix*>(m.prepared)});
    return jit::matvec_group(isa_, ts, k, x, ThreadPool::global());
  }
  // The packed input is cached per thread, so the matrices after the first reuse it. Prompt
  // steps on the AMX tiles read the decode copy where there is one (prefill_reads_prepared);
  // steps of fewer tokens take the AVX-512 tiles over the file's layout, which faults the
  // original's pages back in if they were given back. (Those tiles over the copy, its rows put
  // back in the file's layout 16 at a time, lost: 2 / 4 sessions decoding together on the AMX
  // Xeon 22.9 / 39.9 tok/s against 30.5 / 49.1 over the original.)
  for (const MatmulTarget& m : mats) {
    const auto* copy = dynamic_cast<const jit::RepackedMatrix*>(m.prepared);
    if (!copy || !prefill_reads_prepared(m.type, k) || n < amx_min_tokens(m.type)) {
      matmul(m.type, m.weights, m.rows, k, x, n, m.out);
      continue;
    }
    ThreadPool& pool = ThreadPool::global();
    const jit::ActLayout al = jit::act_layout(m.type, k);
    const uint8_t* act = packed_activation(m.type, isa_, x, k, n, al, pool);
    jit::amx_gemm({m.type, k, nullptr, 0, copy}, m.rows, act, n, m.out, pool);
  }
}

}  // namespace jitllm
