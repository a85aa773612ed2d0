// amx_gemm (jit_amx.h): weight rows split over the pool in chunks of 4 16-row panels; each thread
// unpacks a chunk's panels into its own buffer (L2-resident: 36-140 KiB per 1024 of k) and runs
// every token tile of the prompt against them, so each weight byte is read from memory once per
// call and each activation once per chunk.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_row_split.h"
#include "core/aligned_buffer.h"
#include "core/error.h"

namespace jitllm::jit {

namespace {

constexpr int64_t kChunkRows = 4 * kAmxRows;  // rows a thread packs and runs at a time

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

void amx_gemm(const AmxSource& src, int64_t rows, const uint8_t* act, int64_t n, float* out,
              ThreadPool& pool) {
  const QuantType type = src.type;
  const int64_t k = src.k;
  if (!amx_supported(type, k)) throw_error("amx gemm: {} at k={} unsupported", quant_name(type), k);
  if (src.packed && (src.packed->type != type || src.packed->k != k || src.packed->rows != rows))
    throw_error("amx gemm: the decode copy is {} x {} {}, the call {} x {} {}", src.packed->rows,
                src.packed->k, quant_name(src.packed->type), rows, k, quant_name(type));
  const ActLayout al = act_layout(type, k);

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
  const int64_t out_stride = rows * int64_t(sizeof(float));

  // A chunk's panels are packed together and every token tile runs against all of them, so a
  // tile's activation is read from memory once per chunk (at k = 8192 the prompt's activations
  // outgrow L2; 4 panels of Q4_K are 1.1 MiB there).
  auto chunk = [&](int64_t r0, int64_t r1) {
    thread_local ThreadBuffers tb;
    const int64_t n_panels = (r1 - r0 + kAmxRows - 1) / kAmxRows;
    uint8_t* panels = tb.panel_for(panel_bytes * size_t(n_panels));
    for (int64_t p = 0; p < n_panels; ++p) {
      const int64_t r = r0 + p * kAmxRows;
      amx_pack_panel(src, r, int(std::min<int64_t>(kAmxRows, r1 - r)), panels + size_t(p) * panel_bytes);
    }
    // Full panels together; a partial last one with its row mask.
    const int64_t whole = (r1 - r0) / kAmxRows;
    const int part = int((r1 - r0) % kAmxRows);
    auto run = [&](int64_t p0, int64_t np, uint32_t mask) {
      AmxArgs a{panels + size_t(p0) * panel_bytes, np, act, out + r0 + p0 * kAmxRows,
                out_stride, full, sums.empty() ? nullptr : sums.data(), tb.scratch.get(), mask};
      if (full) full_fn(&a);
      if (rest) {
        a.act = act + size_t(full * kAmxTokens) * al.bytes;
        a.out = out + full * kAmxTokens * rows + r0 + p0 * kAmxRows;
        a.tiles = 1;
        if (a.sums) a.sums = sums.data() + full * kAmxTokens * sums_row;
        rest_fn(&a);
      }
    };
    if (whole) run(0, whole, 0xFFFF);
    if (part) run(whole, 1, (1u << part) - 1);
  };
  // dynamic_rows hands a pool of one thread all rows at once: cut them into chunks here too.
  dynamic_rows(pool, rows, kChunkRows, [&](int64_t r0, int64_t r1) {
    if (!amx_thread_ready()) throw_error("amx gemm: this thread may not use AMX tiles");
    for (int64_t r = r0; r < r1; r += kChunkRows) chunk(r, std::min(r1, r + kChunkRows));
  });
}

}  // namespace jitllm::jit
