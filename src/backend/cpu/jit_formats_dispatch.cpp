// Dispatch of the F16 / BF16 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 matmuls to their generated
// kernels (jit_formats.h): the kernel cache, the packed-activation cache, and the split of rows
// over the global pool (16-row-aligned chunks from an atomic counter, so threads never share an
// output cache line and a thread slowed by other load takes fewer chunks).
#include <xbyak/xbyak_util.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/jit_pack_cache.h"
#include "backend/cpu/jit_row_split.h"
#include "backend/cpu/jit_formats.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace jitllm::jit {

namespace {

bool is_float(QuantType t) { return t == QuantType::F16 || t == QuantType::BF16; }

constexpr int64_t kRowChunk = 16;    // rows per kernel call in the GEMM (weights stay in L1)
constexpr int64_t kTokenBlock = 64;  // tokens per pass over a thread's rows (activations in L2)

struct KeyHash {
  size_t operator()(const FmtKey& k) const {
    size_t h = size_t(k.type);
    h = h * 1000003u ^ size_t(k.k);
    h = h * 1000003u ^ size_t(k.rows * 64 + k.tokens);
    h = h * 1000003u ^ size_t((int(k.isa) * 2 + int(k.order)) * 2 + int(k.bf16_native));
    return h;
  }
};

MatFn kernel(const FmtKey& key) {
  static std::mutex mutex;
  static std::unordered_map<FmtKey, std::unique_ptr<FmtKernel>, KeyHash> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<FmtKernel>(key);
  return slot->fn();
}

// The last packed activation of this thread (see PackCache).
const uint8_t* packed(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                      size_t tok_bytes, ThreadPool& pool) {
  thread_local PackCache cache;
  // Q5_0 / IQ4_NL / MXFP4 differ in the activation's bias sums, so each type is its own family.
  const int family = (int(type) * 8 + int(isa)) * 2 + int(bf16_native(isa));
  return cache.get(family, x, k, n, tok_bytes * size_t(n), [&](uint8_t* dst) {
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      fmt_pack_activation(type, isa, x + t0 * k, k, t1 - t0, dst + size_t(t0) * tok_bytes);
    });
  });
}


}  // namespace

bool other_format_supported(QuantType t) {
  switch (t) {
    case QuantType::F16:
    case QuantType::BF16:
    case QuantType::Q4_1:
    case QuantType::Q5_0:
    case QuantType::Q5_1:
    case QuantType::IQ4_NL:
    case QuantType::MXFP4: return true;
    default: return false;
  }
}

bool cpu_has_avx512_bf16() {
  static const bool has = [] {
    const Xbyak::util::Cpu cpu;
    return cpu.has(Xbyak::util::Cpu::tAVX512_BF16);
  }();
  return has;
}

namespace {
std::atomic<bool> g_bf16_native_enabled{true};
}

bool bf16_native(Isa isa) {
  return isa == Isa::Avx512Vnni && cpu_has_avx512_bf16() &&
         g_bf16_native_enabled.load(std::memory_order_relaxed);
}

void set_bf16_native_enabled(bool enabled) { g_bf16_native_enabled.store(enabled); }

struct FmtKernel::Impl {
  EmittedCode code;
};

FmtKernel::FmtKernel(const FmtKey& key) : impl_(std::make_unique<Impl>()) {
  impl_->code = is_float(key.type) ? emit_float_kernel(key) : emit_block32_kernel(key);
  fn_ = impl_->code.fn;
}
FmtKernel::~FmtKernel() = default;
std::vector<uint8_t> FmtKernel::code() const { return impl_->code.bytes; }

size_t fmt_act_bytes(QuantType type, Isa isa, int64_t k) {
  return is_float(type) ? float_act_bytes(type, isa, k) : block32_act_bytes(type, isa, k);
}

void fmt_pack_activation(QuantType type, Isa isa, const float* x, int64_t k, int64_t n,
                         uint8_t* dst) {
  if (is_float(type)) return float_pack_activation(type, isa, x, k, n, dst);
  block32_pack_activation(type, isa, x, k, n, dst);
}

TileShape fmt_decode_tile(QuantType type, Isa isa, int64_t k) {
  const bool wide = isa == Isa::Avx512Vnni;
  // Float rows a multiple of 4 KiB apart (k = 2048, 4096 ...) fall into the same L1 sets: there
  // one row per pass is faster, elsewhere four rows share the activation loads (docs/perf/cpu.md,
  // "Tuning measurements").
  const bool same_sets = (k * 2) % 4096 == 0;
  if (type == QuantType::F16) return {wide && !same_sets ? 4 : 1, 1};  // ymm: 8 accumulators a row
  if (type == QuantType::BF16) return {same_sets ? 1 : wide ? 4 : 2, 1};
  // Block formats: one row per pass for the blocks that are not a multiple of 4 bytes (Q5_0 22,
  // IQ4_NL 18, MXFP4 17), four for Q4_1 (20) and Q5_1 (24): each the faster at every ISA level
  // (docs/perf/cpu.md, "Tuning measurements"). We have not found why the interleaved row streams
  // stall on the unaligned blocks (the loads of rows 1-3 are the hot spots in perf).
  return {quant_traits(type).block_bytes % 4 == 0 ? 4 : 1, 1};
}

TileShape fmt_gemm_tile(QuantType type, Isa isa) {
  if (is_float(type)) return isa == Isa::Avx512Vnni ? TileShape{4, 6} : TileShape{2, 3};
  // Accumulators: 8 in ymm0..7, or 16 in ymm16..31 (avx512); levels unpacked once per T tokens.
  return isa == Isa::Avx512Vnni ? TileShape{2, 8} : TileShape{2, 4};
}

bool matmul_other_formats(Isa isa, QuantType type, const uint8_t* weights, int64_t rows,
                          int64_t k, const float* x, int64_t n, float* out) {
  if (!other_format_supported(type) || n <= 0 || rows <= 0) return false;
  // The reference's order: tinyBLAS when it applies (2+ tokens, k a multiple of its step, rows in
  // tiles of 4), else ggml_vec_dot, whose k % 64 tail our kernels do not emit.
  FloatOrder order = FloatOrder::Vec;
  if (is_float(type)) {
    const int64_t gemm_step = type == QuantType::F16 ? 16 : 32;
    if (n >= 2 && k % gemm_step == 0 && rows % 4 == 0) order = FloatOrder::Gemm;
    else if (k % 64 != 0) return false;
  } else if (k % 32 != 0) {
    return false;
  }

  const bool native = type == QuantType::BF16 && bf16_native(isa);
  ThreadPool& pool = ThreadPool::global();
  const size_t tok_bytes = fmt_act_bytes(type, isa, k);
  const uint8_t* act = packed(type, isa, x, k, n, tok_bytes, pool);
  const size_t stride = row_bytes(type, k);
  const int64_t out_stride = rows * int64_t(sizeof(float));

  if (n == 1 || (is_float(type) && order == FloatOrder::Vec)) {
    const TileShape ts = fmt_decode_tile(type, isa, k);
    const MatFn fn = kernel({type, k, ts.rows, 1, isa, FloatOrder::Vec, native});
    dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 8), [&](int64_t r0, int64_t r1) {
      for (int64_t t = 0; t < n; ++t) {
        const MatArgs a{weights + size_t(r0) * stride, int64_t(stride), r1 - r0,
                        act + size_t(t) * tok_bytes, out + t * rows + r0, out_stride};
        fn(&a);
      }
    });
    return true;
  }

  const TileShape ts = fmt_gemm_tile(type, isa);
  std::vector<MatFn> fns(size_t(ts.tokens) + 1);  // fns[T]: kernel for T tokens
  for (int t = 1; t <= ts.tokens; ++t)
    fns[size_t(t)] = kernel({type, k, ts.rows, t, isa, order, native});
  dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 4), [&](int64_t r0, int64_t r1) {
    for (int64_t tb = 0; tb < n; tb += kTokenBlock) {
      const int64_t te = std::min(n, tb + kTokenBlock);
      for (int64_t rc = r0; rc < r1; rc += kRowChunk) {
        const int64_t nr = std::min(kRowChunk, r1 - rc);
        for (int64_t t = tb; t < te; t += ts.tokens) {
          const int64_t nt = std::min<int64_t>(ts.tokens, te - t);
          const MatArgs a{weights + size_t(rc) * stride, int64_t(stride), nr,
                          act + size_t(t) * tok_bytes, out + t * rows + rc, out_stride};
          fns[size_t(nt)](&a);
        }
      }
    }
  });
  return true;
}

}  // namespace jitllm::jit
