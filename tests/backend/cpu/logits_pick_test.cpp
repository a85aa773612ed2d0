// The host's logits pick (graph/logits_pick.h), the twin a card's pick must equal: the best
// values with their columns in logit order (equal values lower column first), the named columns,
// the row's log-normaliser, the whole row, the first NaN / +inf column, and the columns past
// `cols` (a padded head) never chosen; CpuOps::pick_logits (the Ops default) row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "graph/logits_pick.h"

namespace jitllm {
namespace {

TEST(LogitsPick, BestInLogitOrderWithTiesToTheLowerColumn) {
  const std::vector<float> row = {1, 3, 3, -INFINITY, 2, 3, 0.5f, 9};  // column 7: padding
  PickedLogits out;
  const std::vector<int32_t> extra = {3, 6};
  pick_row(row.data(), 7, LogitsPick{4, extra, true}, out);
  EXPECT_EQ(out.top_ids, (std::vector<int32_t>{1, 2, 5, 4}));
  EXPECT_EQ(out.top_values, (std::vector<float>{3, 3, 3, 2}));
  EXPECT_EQ(out.extra, (std::vector<float>{-INFINITY, 0.5f}));
  EXPECT_EQ(out.bad, -1);
  EXPECT_EQ(out.max, 3.0f);
  double sum = 0;
  for (int c = 0; c < 7; ++c) sum += std::exp(double(row[size_t(c)]) - 3.0);
  EXPECT_DOUBLE_EQ(out.log_sum, std::log(sum));
  EXPECT_TRUE(out.row.empty());
  // The whole row: its first `cols` values.
  pick_row(row.data(), 7, LogitsPick{}, out);
  EXPECT_EQ(out.row, std::vector<float>(row.begin(), row.begin() + 7));
  EXPECT_TRUE(out.top_ids.empty());
  // Nothing but the extra columns.
  pick_row(row.data(), 7, LogitsPick{0, extra}, out);
  EXPECT_TRUE(out.top_ids.empty());
  EXPECT_EQ(out.extra.size(), 2u);
}

// A grammar's mask: left-out columns count and come as -inf (ties among them to the lower
// column), the log-normaliser sees the raw row.
TEST(LogitsPick, AMaskLeavesColumnsOutAsMinusInfinity) {
  const std::vector<float> row = {5, 1, 4, 2, 3};
  const std::vector<uint64_t> mask = {0b01010};  // columns 1 and 3
  const std::vector<int32_t> extra = {0, 3};
  PickedLogits out;
  LogitsPick p{4, extra, true};
  p.allowed = mask;
  pick_row(row.data(), 5, p, out);
  EXPECT_EQ(out.top_ids, (std::vector<int32_t>{3, 1, 0, 2}));
  EXPECT_EQ(out.top_values, (std::vector<float>{2, 1, -INFINITY, -INFINITY}));
  EXPECT_EQ(out.extra, (std::vector<float>{-INFINITY, 2}));
  EXPECT_EQ(out.max, 5.0f);
  p.allowed = std::span<const uint64_t>();
  const std::vector<uint64_t> none;
  EXPECT_NO_THROW(pick_row(row.data(), 5, p, out));
  std::vector<float> wide(100, 0.0f);
  p.allowed = mask;  // 64 columns for a row of 100
  EXPECT_THROW(pick_row(wide.data(), 100, p, out), Error);
}

TEST(LogitsPick, NamesTheFirstBadColumn) {
  std::vector<float> row(100, 1.0f);
  row[70] = NAN;
  row[40] = INFINITY;
  PickedLogits out;
  pick_row(row.data(), 100, LogitsPick{5}, out);
  EXPECT_EQ(out.bad, 40);
  EXPECT_EQ(out.bad_value, INFINITY);
  pick_row(row.data(), 40, LogitsPick{5}, out);  // both past cols: not candidates
  EXPECT_EQ(out.bad, -1);
  row[3] = NAN;
  pick_row(row.data(), 100, LogitsPick{}, out);
  EXPECT_EQ(out.bad, 3);
  EXPECT_TRUE(std::isnan(out.bad_value));
}

TEST(LogitsPick, RefusesWhatNoBackendGives) {
  const std::vector<float> row(10, 0.0f);
  PickedLogits out;
  EXPECT_THROW(pick_row(row.data(), 10, LogitsPick{11}, out), Error);
  EXPECT_THROW(pick_row(row.data(), 10, LogitsPick{kMaxPickTop + 1}, out), Error);
  const std::vector<int32_t> past = {10};
  EXPECT_THROW(pick_row(row.data(), 10, LogitsPick{1, past}, out), Error);
}

// Both ways pick_row selects (one pass with the best kept in order up to 64, a selection past
// it) against a full sort, on rows with many ties.
TEST(LogitsPick, EqualsAFullSortAtEveryTop) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> grid(-50, 10);
  std::vector<float> row(5000);
  for (float& v : row) v = 0.5f * float(grid(rng));
  row[17] = -INFINITY;
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
  });
  for (const int32_t top : {1, 2, 40, 64, 65, 300, 1024}) {
    PickedLogits out;
    pick_row(row.data(), int64_t(row.size()), LogitsPick{top}, out);
    EXPECT_EQ(out.top_ids, std::vector<int32_t>(order.begin(), order.begin() + top)) << top;
    for (size_t i = 0; i < out.top_ids.size(); ++i)
      EXPECT_EQ(out.top_values[i], row[size_t(out.top_ids[i])]);
  }
}

// CpuOps::pick_logits equals pick_row row by row, on rows of a real vocabulary with ties.
TEST(LogitsPick, CpuOpsPickEachRow) {
  const int64_t rows = 5, n_vocab = 151936, cols = 151665;  // Qwen's padded head
  std::vector<float> x(size_t(rows * n_vocab));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> grid(-400, 100);
  for (float& v : x) v = 0.0625f * float(grid(rng));
  x[size_t(2 * n_vocab + 151700)] = 1e9f;  // padding: never a candidate
  const std::vector<int32_t> extra = {0, 151664};
  const std::vector<LogitsPick> picks = {LogitsPick{40, extra, true}, LogitsPick{1},
                                         LogitsPick{1024}, LogitsPick{}, LogitsPick{0}};
  std::vector<PickedLogits> out(static_cast<size_t>(rows));
  CpuOps ops;
  ops.pick_logits(Act{x.data(), rows, n_vocab}, LogitsPicks{cols, picks, out.data()});
  for (int64_t r = 0; r < rows; ++r) {
    PickedLogits want;
    pick_row(x.data() + r * n_vocab, cols, picks[size_t(r)], want);
    EXPECT_EQ(out[size_t(r)].top_ids, want.top_ids) << "row " << r;
    EXPECT_EQ(out[size_t(r)].top_values, want.top_values) << "row " << r;
    EXPECT_EQ(out[size_t(r)].extra, want.extra) << "row " << r;
    EXPECT_EQ(out[size_t(r)].row, want.row) << "row " << r;
    EXPECT_EQ(out[size_t(r)].log_sum, want.log_sum) << "row " << r;
  }
  EXPECT_EQ(out[2].top_ids.size(), 1024u);
  EXPECT_TRUE(std::is_sorted(out[2].top_values.rbegin(), out[2].top_values.rend()));
  EXPECT_NE(out[2].top_values[0], 1e9f);
  EXPECT_EQ(out[3].row.size(), size_t(cols));
  // A second call into the same results.
  ops.pick_logits(Act{x.data(), rows, n_vocab}, LogitsPicks{cols, picks, out.data()});
  EXPECT_EQ(out[1].top_ids.size(), 1u);
  EXPECT_THROW(ops.pick_logits(Act{x.data(), rows, n_vocab},
                               LogitsPicks{cols, std::span(picks).first(2), out.data()}),
               Error);
}

}  // namespace
}  // namespace jitllm
