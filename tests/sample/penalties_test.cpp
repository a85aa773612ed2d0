// Repetition penalties: the window counts, and exactly the seen tokens' logits change, by the
// amounts of llama.cpp's rule worked out by hand below.
#include "sample/penalties.h"

#include <gtest/gtest.h>

#include <vector>

namespace jitllm {
namespace {

Candidates make(const std::vector<float>& logits) {
  Candidates cur;
  cur.assign(logits);
  return cur;
}

TEST(PenaltyWindow, CountsOnlyTheLastN) {
  PenaltyWindow window(3);
  for (int32_t t : {5, 5, 7, 9}) window.accept(t);
  // The first 5 fell out of the 3-token window.
  EXPECT_EQ(window.size(), 3u);
  EXPECT_EQ(window.count(5), 1);
  EXPECT_EQ(window.count(7), 1);
  EXPECT_EQ(window.count(9), 1);
  window.accept(9);  // drops the second 5
  EXPECT_EQ(window.count(5), 0);
  EXPECT_EQ(window.count(9), 2);
  window.clear();
  EXPECT_EQ(window.count(9), 0);
}

TEST(PenaltyWindow, ZeroRemembersNothingMinusOneEverything) {
  PenaltyWindow off(0);
  off.accept(1);
  EXPECT_EQ(off.count(1), 0);
  PenaltyWindow all(-1);
  for (int i = 0; i < 1000; ++i) all.accept(4);
  EXPECT_EQ(all.count(4), 1000);
}

TEST(PenaltyWindow, ChangesExactlyTheSeenTokens) {
  PenaltyWindow window(8);
  for (int32_t t : {1, 2, 1, 4}) window.accept(t);  // counts: 1 -> 2, 2 -> 1, 4 -> 1
  Candidates cur = make({0.5f, 2.0f, -1.0f, 3.0f, 0.0f, -0.25f});
  window.apply(cur, /*repeat=*/2.0f, /*frequency=*/0.5f, /*presence=*/0.25f);
  // id 1:  2.0 > 0 -> 2.0 / 2 = 1.0;   minus 2 * 0.5 + 0.25 = 1.25  -> -0.25
  // id 2: -1.0 <= 0 -> -1.0 * 2 = -2.0; minus 1 * 0.5 + 0.25 = 0.75  -> -2.75
  // id 4:  0.0 <= 0 -> 0 * 2 = 0;       minus 0.75                   -> -0.75
  const std::vector<float> expected = {0.5f, -0.25f, -2.75f, 3.0f, -0.75f, -0.25f};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(cur.data[i].id, int32_t(i));
    EXPECT_FLOAT_EQ(cur.data[i].logit, expected[i]) << "token " << i;
  }
  EXPECT_FALSE(cur.sorted);
}

TEST(PenaltyWindow, NeutralPenaltiesChangeNothing) {
  PenaltyWindow window(8);
  window.accept(0);
  Candidates cur = make({2.0f, 1.0f});
  window.apply(cur, 1.0f, 0.0f, 0.0f);
  EXPECT_EQ(cur.data[0].logit, 2.0f);
  // Repeat penalty alone: 2 / 1.25.
  window.apply(cur, 1.25f, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(cur.data[0].logit, 1.6f);
  EXPECT_EQ(cur.data[1].logit, 1.0f);
}

}  // namespace
}  // namespace jitllm
