// Row-interleaved copies of decode weights ("repacked" matrices) for the matvec kernels
// (jit_matvec.h), in 2 MiB pages of our own memory (core/huge_buffer.h).
//
// Why: from DRAM, the GGUF layout makes a kernel that computes R rows per pass read R streams at
// the row stride (2-6 KiB apart), with Q8_0's 34-byte blocks splitting half its 32-byte loads
// over two cache lines and 4 KiB file pages costing a TLB miss per page. Interleaved, a pass over
// R rows reads ONE sequential stream of aligned loads (plus a small scale plane for Q8_0/Q6_K),
// which the hardware prefetcher follows and one software prefetch per line covers.
//
// Layout of a matrix of `rows` rows of nb blocks, group G = kRepackGroup (4) rows:
//   rows are taken in groups of G; the tail (rows % G) as groups of one row. For each group, block
//   by block: the G rows' block headers (hdr bytes each), then the G rows' block bodies (body
//   bytes each) in the main plane; the G rows' side bytes in the side plane. A group starting at
//   row r0 therefore begins at main + r0 * nb * (hdr + body) and side + r0 * nb * side, whatever
//   the grouping before it, and a pass over the group walks both planes forward only.
//   Fields (bytes of the GGUF block):
//     Q8_0 (34):  hdr -,            body qs[32] (2..34),              side d (0..2)
//     Q4_K (144): hdr d,dmin,scales[12] (0..16), body qs[128] (16..144), side -
//     Q6_K (210): hdr scales[16] (192..208),     body ql,qh (0..192),    side d (208..210)
//   With G = 4 every main-plane record (Q8_0 128 B, Q4_K 64 + 512, Q6_K 64 + 768) is a whole number
//   of 64-byte lines, so the planes start 64-byte aligned and no full-group load crosses a line.
// Nothing is converted: the bytes are the GGUF bytes, moved, so results equal the GGUF-layout
// kernels' bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/cpu/reference_kernels.h"
#include "core/huge_buffer.h"
#include "quant/types.h"

namespace jitllm {
class ThreadPool;
}

namespace jitllm::jit {

constexpr int kRepackGroup = 4;  // rows interleaved per group (the matvec kernels' rows per pass)

// Bytes per row and block in each part of the layout above, and where they come from in the GGUF
// block.
struct RepackFields {
  int block_bytes;
  int hdr_from, hdr;    // header: GGUF offset, bytes
  int body_from, body;  // body
  int side_from, side;  // side plane
};
// Whether `type` has an interleaved layout; fields() throws for other formats.
bool repack_supported(QuantType type);
RepackFields repack_fields(QuantType type);

// A repacked matrix: both planes in one piece of a shared huge-page slab (the side plane after the
// main one, 64-byte aligned). Matrices share slabs of >= 32 MiB (a 512 x 2048 Q4_K attn_k is 576
// KiB: a 2 MiB buffer of its own would waste 70%); a slab lives while a matrix in it does. The
// original is not referenced after construction.
struct RepackedMatrix final : PreparedWeights {
  QuantType type;
  int64_t rows = 0, k = 0;
  int64_t main_row_bytes = 0;  // bytes of a row in the main plane (nb * (hdr + body))
  int64_t side_row_bytes = 0;  // nb * side
  const uint8_t* main = nullptr;  // [rows, main_row_bytes], interleaved as above
  const uint8_t* side = nullptr;  // [rows, side_row_bytes], interleaved as above
  size_t bytes = 0;                      // of both planes
  std::shared_ptr<const HugeBuffer> slab;  // holds the planes
};

// Repacks rows x k weights (GGUF rows of row_bytes(type, k)) into fresh storage; the copy is
// spread over `pool` when given. Throws for a format without a layout or a bad k.
std::unique_ptr<RepackedMatrix> repack_matrix(QuantType type, const uint8_t* weights, int64_t rows,
                                              int64_t k, ThreadPool* pool = nullptr);

// Whether decode weights are repacked (JITLLM_REPACK=0 turns it off; default on).
bool repack_enabled();

}  // namespace jitllm::jit
