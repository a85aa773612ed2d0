// amx_gemm (jit_amx.h): weight rows split over the pool in 16-row panels; each thread unpacks a
// panel into its own buffer (L2-resident: 9-36 KiB per 1024 of k) and runs every token tile of
// the prompt against it, so each weight byte is read from memory once per call.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_row_split.h"
#include "core/aligned_buffer.h"
#include "core/error.h"

namespace jitllm::jit {

namespace {

// A thread's reusable panel and scratch, grown on demand.
struct ThreadBuffers {
  AlignedPtr<uint8_t> panel;
  size_t panel_bytes = 0;
  AlignedPtr<uint8_t> scratch = make_aligned<uint8_t>(2048, 64);

  uint8_t* panel_for(size_t bytes) {
    if (bytes > panel_bytes) {
      panel = make_aligned<uint8_t>(bytes, 64);
      panel_bytes = bytes;
    }
    return panel.get();
  }
};

}  // namespace

void amx_gemm(QuantType type, const uint8_t* w, int64_t rows, int64_t k, const uint8_t* act,
              int64_t n, float* out, ThreadPool& pool) {
  if (!amx_supported(type, k)) throw_error("amx gemm: {} at k={} unsupported", quant_name(type), k);
  const ActLayout al = act_layout(type, k);
  const size_t stride = row_bytes(type, k);

  // Q4_K's mins need the activation's 32-element sums as floats: [n][k / 32].
  std::vector<float> sums;
  if (type == QuantType::Q4_K) {
    const int64_t groups = k / 32;
    sums.resize(size_t(n * groups));
    for (int64_t t = 0; t < n; ++t) {
      const auto* s32 = reinterpret_cast<const int32_t*>(act + size_t(t) * al.bytes + al.s32);
      for (int64_t g = 0; g < groups; ++g) sums[size_t(t * groups + g)] = float(s32[g]);
    }
  }

  const int64_t full = n / kAmxTokens, rest = n % kAmxTokens;
  const AmxFn full_fn = full ? amx_kernel({type, k, kAmxTokens}) : nullptr;
  const AmxFn rest_fn = rest ? amx_kernel({type, k, int(rest)}) : nullptr;
  const size_t panel_bytes = amx_panel_bytes(type, k);
  const int64_t sums_row = k / 32;

  dynamic_rows(pool, rows, row_chunk(rows, pool.size(), 4), [&](int64_t r0, int64_t r1) {
    if (!amx_thread_ready()) throw_error("amx gemm: this thread may not use AMX tiles");
    thread_local ThreadBuffers tb;
    uint8_t* panel = tb.panel_for(panel_bytes);
    for (int64_t r = r0; r < r1; r += kAmxRows) {
      const int nr = int(std::min<int64_t>(kAmxRows, r1 - r));
      amx_pack_panel(type, w + size_t(r) * stride, int64_t(stride), nr, k, panel);
      AmxArgs a{panel,     act,     out + r,
                int64_t(rows * sizeof(float)),    full,
                sums.empty() ? nullptr : sums.data(), tb.scratch.get(),
                uint32_t((1u << nr) - 1)};
      if (full) full_fn(&a);
      if (rest) {
        a.act = act + size_t(full * kAmxTokens) * al.bytes;
        a.out = out + full * kAmxTokens * rows + r;
        a.tiles = 1;
        if (a.sums) a.sums = sums.data() + full * kAmxTokens * sums_row;
        rest_fn(&a);
      }
    }
  });
}

}  // namespace jitllm::jit
