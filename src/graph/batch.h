// What one forward step is given: a ragged batch of rows over several sequences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "graph/kv.h"

namespace jitllm {

// One forward step over a ragged batch: row i is token tokens[i] of sequence seq[i] at position
// pos[i]. Rows of one sequence are consecutive and in position order; every sequence has pages
// for all its positions. Logits are produced for `out_rows` (ascending row indices).
struct Batch {
  std::span<const int32_t> tokens;
  std::span<const int32_t> pos;
  std::span<const int32_t> seq;
  std::span<const KvSeq> seqs;
  std::span<const int32_t> out_rows;
  // Each row's token type (an encoder's segment: 0 for a cross-encoder's query, 1 for its
  // document), or empty: every row of type 0.
  std::span<const int32_t> types = {};
  size_t n_rows() const { return tokens.size(); }
};

}  // namespace jitllm
