// Stateless sampler stages on hand-made logits. Expected sets are derived by hand from
// probabilities chosen as powers of two (comments show the arithmetic), not from the code.
#include "sample/filters.h"

#include "core/error.h"

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace jitllm {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

Candidates make(const std::vector<float>& logits) {
  Candidates cur;
  cur.assign(logits);
  return cur;
}

std::vector<int32_t> ids(const Candidates& cur) {
  std::vector<int32_t> out;
  for (const auto& c : cur.data) out.push_back(c.id);
  return out;
}

// Token id -> probability: id 3: 1/2, id 0: 1/4, id 4: 1/8, ids 1 and 2: 1/16 each.
// Logits are log-probabilities plus an offset (softmax ignores it).
std::vector<float> pow2_logits() {
  const float c = 1.7f;
  return {std::log(0.25f) + c, std::log(0.0625f) + c, std::log(0.0625f) + c,
          std::log(0.5f) + c, std::log(0.125f) + c};
}

TEST(TopK, KeepsExactlyKHighestSorted) {
  Candidates cur = make({0.1f, 2.0f, -1.0f, 3.0f, 0.5f, 2.5f});
  apply_top_k(cur, 3);
  EXPECT_THAT(ids(cur), ElementsAre(3, 5, 1));
  EXPECT_TRUE(cur.sorted);
}

TEST(TopK, TiesGoToLowerIdAndLargeKOrZeroKeepAll) {
  Candidates cur = make({1.0f, 2.0f, 2.0f, 2.0f});
  apply_top_k(cur, 2);
  EXPECT_THAT(ids(cur), ElementsAre(1, 2));

  Candidates all = make({1.0f, 2.0f, 0.0f});
  apply_top_k(all, 10);
  EXPECT_THAT(ids(all), ElementsAre(1, 0, 2));

  Candidates off = make({1.0f, 2.0f, 0.0f});
  apply_top_k(off, 0);
  EXPECT_THAT(ids(off), ElementsAre(0, 1, 2));  // untouched, still in id order
  EXPECT_FALSE(off.sorted);
}

TEST(TopP, KeepsTheTokenThatCrossesP) {
  // Sorted probabilities 1/2, 1/4, 1/8, 1/16, 1/16; cumulative 0.5, 0.75, 0.875, 0.9375, 1.
  struct Case {
    float p;
    std::vector<int32_t> kept;
  };
  const Case cases[] = {
      {0.10f, {3}},           // 0.5 already reaches 0.1
      {0.60f, {3, 0}},        // 0.5 < 0.6 <= 0.75: the crossing token (id 0) is kept
      {0.74f, {3, 0}},        //
      {0.76f, {3, 0, 4}},     // 0.75 < 0.76
      {0.90f, {3, 0, 4, 1}},  // 0.875 < 0.9 <= 0.9375; ids 1 and 2 tie, lower id first
  };
  for (const auto& c : cases) {
    Candidates cur = make(pow2_logits());
    apply_top_p(cur, c.p, 0);
    EXPECT_EQ(ids(cur), c.kept) << "p = " << c.p;
    float sum = 0;
    for (const auto& t : cur.data) sum += t.p;
    EXPECT_LE(sum, 1.0f + 1e-6f);
  }
}

TEST(TopP, MinKeepAndDisabled) {
  Candidates cur = make(pow2_logits());
  apply_top_p(cur, 0.1f, 3);
  EXPECT_THAT(ids(cur), ElementsAre(3, 0, 4));

  Candidates off = make(pow2_logits());
  apply_top_p(off, 1.0f, 0);
  EXPECT_EQ(off.size(), 5u);
  EXPECT_THAT(ids(off), ElementsAre(0, 1, 2, 3, 4));
}

TEST(TopP, NucleusBeyondTheFirstSortedPrefix) {
  // 1000 tokens, all probability 1/1000 up to tiny logit steps, shuffled ids. p = 0.5005 lies
  // between 500 and 501 tokens' worth, so exactly 501 are kept: the 501 highest logits.
  std::vector<float> logits(1000);
  std::vector<int32_t> perm(1000);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 shuffle_rng(7);
  std::shuffle(perm.begin(), perm.end(), shuffle_rng);
  for (int32_t rank = 0; rank < 1000; ++rank) logits[size_t(perm[size_t(rank)])] = -1e-6f * rank;
  Candidates cur = make(logits);
  apply_top_p(cur, 0.5005f, 0);
  ASSERT_EQ(cur.size(), 501u);
  for (size_t rank = 0; rank < cur.size(); ++rank) ASSERT_EQ(cur.data[rank].id, perm[rank]);

  // min_keep = everything: the sorted prefix grows to the whole list (256 -> 1000).
  Candidates all = make(logits);
  apply_top_p(all, 0.5f, 1000);
  ASSERT_EQ(all.size(), 1000u);
  EXPECT_TRUE(all.sorted);
  for (size_t rank = 0; rank < all.size(); ++rank) ASSERT_EQ(all.data[rank].id, perm[rank]);
}

TEST(MinP, ThresholdIsRelativeToTheMostLikelyToken) {
  // p_max = 1/2. min_p 0.3 -> threshold 0.15: keeps 1/2 and 1/4. min_p 0.24 -> 0.12: adds 1/8.
  Candidates a = make(pow2_logits());
  apply_min_p(a, 0.3f, 0);
  EXPECT_THAT(ids(a), ElementsAre(0, 3));  // unsorted input keeps its order
  Candidates b = make(pow2_logits());
  apply_min_p(b, 0.24f, 0);
  EXPECT_THAT(ids(b), ElementsAre(0, 3, 4));
  Candidates c = make(pow2_logits());
  apply_min_p(c, 0.126f, 0);  // threshold 0.063 > 1/16
  EXPECT_THAT(ids(c), ElementsAre(0, 3, 4));
  Candidates d = make(pow2_logits());
  apply_min_p(d, 0.124f, 0);  // threshold 0.062 < 1/16: everything passes
  EXPECT_EQ(d.size(), 5u);
}

TEST(MinP, MinKeepFallsBackToTheBest) {
  Candidates cur = make(pow2_logits());
  apply_min_p(cur, 0.9f, 3);  // only id 3 passes, min_keep asks for 3
  EXPECT_THAT(ids(cur), ElementsAre(3, 0, 4));
  Candidates off = make(pow2_logits());
  apply_min_p(off, 0.0f, 0);
  EXPECT_EQ(off.size(), 5u);
}

TEST(Typical, KeepsTokensClosestToTheEntropy) {
  // H = ln2 * (1/2*1 + 1/4*2 + 1/8*3 + 2/16*4) = 1.875 ln2. Surprisals -ln p = ln2 * {1,2,3,4,4},
  // distances |s - H| = ln2 * {0.875, 0.125, 1.125, 2.125, 2.125}: order id 0 (1/4), id 3 (1/2),
  // id 4 (1/8), ids 1, 2. Cumulative 0.25, 0.75, 0.875, ...; kept once it exceeds p strictly.
  Candidates a = make(pow2_logits());
  apply_typical(a, 0.2f, 0);
  EXPECT_THAT(ids(a), ElementsAre(0));
  Candidates b = make(pow2_logits());
  apply_typical(b, 0.5f, 0);
  EXPECT_THAT(ids(b), ElementsAre(0, 3));
  Candidates c = make(pow2_logits());
  apply_typical(c, 0.8f, 0);
  EXPECT_THAT(ids(c), ElementsAre(0, 3, 4));
  EXPECT_FALSE(c.sorted);
  Candidates d = make(pow2_logits());
  apply_typical(d, 0.2f, 2);  // min_keep
  EXPECT_THAT(ids(d), ElementsAre(0, 3));
  Candidates off = make(pow2_logits());
  apply_typical(off, 1.0f, 0);
  EXPECT_EQ(off.size(), 5u);
}

TEST(Temperature, DividesLogits) {
  Candidates cur = make({2.0f, -1.0f, 0.5f});
  apply_temperature(cur, 0.5f);
  EXPECT_EQ(cur.data[0].logit, 4.0f);
  EXPECT_EQ(cur.data[1].logit, -2.0f);
  EXPECT_EQ(cur.data[2].logit, 1.0f);
}

TEST(Argmax, TiesGoToLowestId) {
  Candidates cur = make({1.0f, 3.0f, 3.0f, 2.0f});
  EXPECT_EQ(cur.data[argmax_candidate(cur)].id, 1);
  // Same after reordering: the id decides, not the position.
  std::reverse(cur.data.begin(), cur.data.end());
  EXPECT_EQ(cur.data[argmax_candidate(cur)].id, 1);
}

TEST(Candidates, PlusInfinityIsTheModelsFaultMinusInfinityIsAMask) {
  Candidates cur;
  EXPECT_THROW(cur.assign(std::vector<float>{0.0f, INFINITY}), ModelOutputError);
  EXPECT_NO_THROW(cur.assign(std::vector<float>{0.0f, -INFINITY}));
}

TEST(Candidates, NaNLogitIsAnError) {
  Candidates cur;
  const std::vector<float> logits = {0.0f, NAN, 1.0f};
  try {
    cur.assign(logits);
    FAIL() << "expected an error";
  } catch (const ModelOutputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("logits[1] is NaN"));
  }
}

}  // namespace
}  // namespace jitllm
