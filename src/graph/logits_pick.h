// What a step brings home of a logits row for a caller that samples: the row's best few values
// with their columns, the values of a few named columns and, on request, the row's
// log-normaliser, instead of the whole row (a vocabulary of 150k floats per row). The sampler
// says what its chain needs (sample/sampler_chain.h: SamplerChain::reduction); a backend that
// keeps the logits on a card selects there and copies home only this (backend/cuda/pick_ops.cpp,
// pick_source.cpp).
// pick_row here is the plain twin every backend's result must equal. Must not know about
// sampling: it only selects.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace jitllm {

// What to bring home of one row.
struct LogitsPick {
  // The `top` largest values among the row's first `cols` columns (see LogitsPicks), highest
  // first, equal values lower column first; -1: the whole row (its first `cols` values).
  int32_t top = -1;
  std::span<const int32_t> extra;  // columns (< cols) whose values come too
  bool log_norm = false;           // the row's max and log(sum exp(x - max)), in double
  // Empty, or [ceil(cols / 64)] bits (bit c of word c / 64: column c may be chosen): a grammar's
  // mask. A column it leaves out counts as -inf for `top` and comes as -inf (top and extra),
  // as the sampler's mask makes it; `bad` and the log-normaliser still see the raw row. Ignored
  // for a whole row (top -1).
  std::span<const uint64_t> allowed;
};

// What came home of one row. When `bad` >= 0 the rest is unspecified.
struct PickedLogits {
  std::vector<int32_t> top_ids;   // [top] highest first, equal values lower column first
  std::vector<float> top_values;  // [top]
  std::vector<float> extra;       // [extra.size()] the values of LogitsPick::extra
  std::vector<float> row;         // [cols] when top < 0
  float max = 0.0f;               // with log_norm: the row's largest value
  double log_sum = 0.0;           // with log_norm: log(sum over the row of exp(x - max))
  int64_t bad = -1;               // the lowest column holding NaN or +inf, or -1
  float bad_value = 0.0f;         // its value
};

// A step's request: one pick per output row.
struct LogitsPicks {
  int64_t cols = 0;                  // only the first `cols` columns are candidates (a head
                                     // padded past the tokenizer's last token)
  std::span<const LogitsPick> rows;  // [out_rows]
  PickedLogits* out = nullptr;       // [out_rows]
};

// The largest value a pick may ask `top` for (a card's selection keeps this many per row).
inline constexpr int32_t kMaxPickTop = 1024;

// Throws jitllm::Error when a pick asks for what no backend can give: top past kMaxPickTop or
// cols, an extra column outside [0, cols), a mask shorter than cols.
void check_pick(const LogitsPick& pick, int64_t cols);

// The pick of `row` ([>= cols] values) on the host: the reference every backend's pick equals
// (top ids and values exactly; log_sum to the rounding of a sum in another order).
void pick_row(const float* row, int64_t cols, const LogitsPick& pick, PickedLogits& out);

}  // namespace jitllm
