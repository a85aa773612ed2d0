// Prompt GEMMs on Intel AMX tiles (AMX-INT8 `tdpbssd`, emitted with Xbyak) for Q8_0, Q4_0, Q4_K
// and Q6_K weights, used where the CPU has AMX and the kernel lets every thread use it
// (jit_cpu_features.h: amx_usable / amx_thread_ready).
//
// Activations are the packed ones the AVX kernels read (jit_matmul.h: int8 quants per token, a
// scale per 32- or 256-block), loaded as tile rows straight from that layout (one token a row).
// Weights are unpacked 16 rows at a time into a "panel" of int8 tiles in AMX's VNNI order:
//   block-of-32 formats (Q8_0, Q4_0): per block, the 32 signed values of each row (Q4_0: q - 8)
//     and the rows' scales d;
//   K formats (Q4_K, Q6_K): per 256-super-block, each element's integer weight v = scale * q
//     (Q4_K: sc_j * q; Q6_K: sc_j * (q - 32)) split as v = 64 * hi + lo (hi, lo int8), so one
//     tile of hi and one of lo per 64 elements give the super-block's integer sum exactly
//     (Σ a v = 64 Σ a hi + Σ a lo, int32); then the rows' d (and Q4_K's dmin, mins m_j).
// Every integer sum the reference forms (per 32-block, or per super-block with its scales) is
// formed exactly; only the float accumulation order differs (as the AVX kernels').
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/jit_matmul.h"
#include "backend/cpu/jit_repack.h"
#include "core/thread_pool.h"
#include "quant/types.h"

namespace jitllm::jit {

constexpr int kAmxRows = 16;    // weight rows per panel (a tile's 16 int32 columns)
constexpr int kAmxTokens = 16;  // tokens per tile (a tile's 16 rows)

// Formats and sizes the AMX GEMM takes.
bool amx_supported(QuantType type, int64_t k);

// The weights a GEMM reads: rows in the file's layout (`stride` bytes apart), or the
// row-interleaved decode copy (jit_repack.h), so prefill and decode can share one copy.
struct AmxSource {
  QuantType type;
  int64_t k;
  const uint8_t* w = nullptr;  // file layout
  int64_t stride = 0;
  const RepackedMatrix* packed = nullptr;  // or the interleaved copy (w unused)

  // Block b of row r in the file's layout: a pointer into w, or assembled in tmp (block_bytes).
  const uint8_t* block(int64_t r, int64_t b, uint8_t* tmp) const;
  // The same block's fields in place (f = repack_fields(type): header, body, side), without
  // assembling: each pointer is where the field starts, in either layout. Formats with a
  // decode-copy layout only (Q8_0, Q4_K, Q6_K).
  struct Fields {
    const uint8_t *hdr, *body, *side;
  };
  Fields fields(const RepackFields& f, int64_t r, int64_t b) const {
    if (!packed) {
      const uint8_t* blk = w + size_t(r) * size_t(stride) + size_t(b) * size_t(f.block_bytes);
      return {blk + f.hdr_from, blk + f.body_from, blk + f.side_from};
    }
    const int64_t full = packed->rows - packed->rows % kRepackGroup;
    const int64_t g = r < full ? kRepackGroup : 1;
    const int64_t first = r < full ? r - r % kRepackGroup : r, i = r - first;
    const uint8_t* rec = packed->main + size_t(first * packed->main_row_bytes) +
                         size_t(b * g * (f.hdr + f.body));
    return {rec + i * f.hdr, rec + g * f.hdr + i * f.body,
            packed->side + size_t(first * packed->side_row_bytes) + size_t((b * g + i) * f.side)};
  }
};

// Bytes of one 16-row panel of `type` at width k (a multiple of 64).
size_t amx_panel_bytes(QuantType type, int64_t k);
// Unpacks rows [r0, r0 + n_rows) (n_rows <= 16) of `src` into `panel`; rows past n_rows are
// zero.
void amx_pack_panel(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel);
// The same bytes through plain C++ (the test oracle of the above, which runs AVX-512 code).
void amx_pack_panel_reference(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel);

struct AmxArgs {
  const uint8_t* panel;  // `panels` packed panels (amx_pack_panel), amx_panel_bytes apart
  int64_t panels;
  const uint8_t* act;    // first token's packed activation (act_layout(type, k))
  float* out;            // out[t * out_stride / 4 + 16 p + r]: token t, panel p, row r
  int64_t out_stride;    // bytes between consecutive tokens' outputs
  int64_t tiles;         // tiles of `tokens` tokens, one after the other
  const float* sums;     // Q4_K: [token][k / 32] the activation's 32-element sums as floats
  uint8_t* scratch;      // 2 KiB, 64-byte aligned: the int32 tiles stored for the float work
  uint32_t row_mask;     // bit r: row r of every panel is written
};
using AmxFn = void (*)(const AmxArgs*);

struct AmxKey {
  QuantType type;
  int64_t k;
  int tokens;  // 1..16 tokens per tile
  bool operator==(const AmxKey&) const = default;
};

// A call runs, for each token tile, every panel against it (the tile stays in L1/L2 while the
// panels, packed once per call, stay in L2).
// The kernel for `key`, emitted on first use and kept for the process (thread-safe).
AmxFn amx_kernel(const AmxKey& key);
// The machine code of a fresh emission (for the determinism test).
std::vector<uint8_t> amx_kernel_code(const AmxKey& key);

// out[t * rows + r] = dot(row r of src, token t) for n tokens whose packed activation is `act`, the
// rows spread over `pool`. The calling threads must be AMX-ready (amx_thread_ready()).
void amx_gemm(const AmxSource& src, int64_t rows, const uint8_t* act, int64_t n, float* out,
              ThreadPool& pool);

}  // namespace jitllm::jit
