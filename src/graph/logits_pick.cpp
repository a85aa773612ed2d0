// The host's pick of a logits row (see logits_pick.h).
#include "graph/logits_pick.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace jitllm {

void check_pick(const LogitsPick& pick, int64_t cols) {
  if (pick.top > kMaxPickTop || pick.top > cols)
    throw_error("logits pick: top {} of a row of {} (at most {})", pick.top, cols, kMaxPickTop);
  for (const int32_t c : pick.extra)
    if (c < 0 || c >= cols) throw_error("logits pick: column {} outside [0, {})", c, cols);
  if (!pick.allowed.empty() && int64_t(pick.allowed.size()) * 64 < cols)
    throw_error("logits pick: a mask of {} columns for a row of {}", pick.allowed.size() * 64, cols);
}

namespace {

// The `top` best of row[0, cols) into ids/values, highest first, ties to the lower column: one
// pass with the best so far kept in order (a row rarely beats the kept worst, so the insertions
// are few); past kInsertionTop a selection over every column is cheaper.
constexpr int32_t kInsertionTop = 64;

void best_in_one_pass(const float* row, int64_t cols, int32_t top, PickedLogits& out) {
  if (top <= 0) return;
  std::vector<int32_t>& ids = out.top_ids;
  std::vector<float>& vals = out.top_values;
  ids.reserve(size_t(top));
  vals.reserve(size_t(top));
  for (int64_t c = 0; c < cols; ++c) {
    const float v = row[c];
    // A later column with an equal value ranks after: only a strictly larger one gets in.
    if (int32_t(vals.size()) == top && !(v > vals.back())) continue;
    size_t at = vals.size();
    while (at > 0 && v > vals[at - 1]) --at;
    if (int32_t(vals.size()) == top) {
      ids.pop_back();
      vals.pop_back();
    }
    ids.insert(ids.begin() + ptrdiff_t(at), int32_t(c));
    vals.insert(vals.begin() + ptrdiff_t(at), v);
  }
}

void best_by_selection(const float* row, int64_t cols, int32_t top, PickedLogits& out) {
  std::vector<int32_t> ids(static_cast<size_t>(cols));
  std::iota(ids.begin(), ids.end(), 0);
  const auto before = [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  };
  const auto mid = ids.begin() + top;
  std::nth_element(ids.begin(), mid, ids.end(), before);
  std::sort(ids.begin(), mid, before);
  out.top_ids.assign(ids.begin(), mid);
  for (const int32_t id : out.top_ids) out.top_values.push_back(row[id]);
}

}  // namespace

void pick_row(const float* row, int64_t cols, const LogitsPick& pick, PickedLogits& out) {
  check_pick(pick, cols);
  out = PickedLogits{};
  for (int64_t c = 0; c < cols; ++c)
    if (std::isnan(row[c]) || row[c] == INFINITY) {
      out.bad = c;
      out.bad_value = row[c];
      return;
    }
  // [cols] the row as the mask leaves it (masked columns -inf), or the row itself.
  std::vector<float> masked;
  const float* sel = row;
  if (!pick.allowed.empty() && pick.top >= 0) {
    masked.assign(row, row + cols);
    for (int64_t c = 0; c < cols; ++c)
      if (!((pick.allowed[size_t(c >> 6)] >> (c & 63)) & 1)) masked[size_t(c)] = -INFINITY;
    sel = masked.data();
  }
  if (pick.top < 0) out.row.assign(row, row + cols);
  else if (pick.top <= kInsertionTop) best_in_one_pass(sel, cols, pick.top, out);
  else best_by_selection(sel, cols, pick.top, out);
  for (const int32_t c : pick.extra) out.extra.push_back(sel[c]);
  if (pick.log_norm) {
    out.max = *std::max_element(row, row + cols);
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(row[c]) - double(out.max));
    out.log_sum = std::log(sum);
  }
}

}  // namespace jitllm
