// Log-softmax of raw logits against probabilities chosen by hand.
#include "sample/logprobs.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace jitllm {
namespace {

TEST(Logprobs, LogSoftmaxOfKnownProbabilities) {
  // Logits = log p + a large offset: the offset must cancel without overflow.
  const std::vector<double> probs = {0.5, 0.25, 0.125, 0.125};
  std::vector<float> logits;
  for (double p : probs) logits.push_back(float(std::log(p) + 1000.0));
  const auto lp = log_softmax(logits);
  ASSERT_EQ(lp.size(), probs.size());
  for (size_t i = 0; i < probs.size(); ++i) {
    // float logits near 1000 carry ~6e-5 of rounding.
    EXPECT_NEAR(lp[i], std::log(probs[i]), 1e-4) << i;
    EXPECT_NEAR(logprobs(logits, int32_t(i)), std::log(probs[i]), 1e-4) << i;
  }
}

TEST(Logprobs, BannedTokenIsMinusInfinity) {
  const std::vector<float> logits = {0.0f, -INFINITY, 0.0f};
  EXPECT_EQ(logprobs(logits, 1), -INFINITY);
  EXPECT_NEAR(logprobs(logits, 0), std::log(0.5), 1e-7);
}

TEST(Logprobs, TopLogprobsSortedTiesByLowerId) {
  const std::vector<float> logits = {std::log(0.2f), std::log(0.4f), std::log(0.2f),
                                     std::log(0.2f)};
  const auto top = top_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 0);
  EXPECT_EQ(top[2].id, 2);
  EXPECT_NEAR(top[0].logprob, std::log(0.4), 1e-6);
  EXPECT_NEAR(top[2].logprob, std::log(0.2), 1e-6);
  EXPECT_EQ(top_logprobs(logits, 10).size(), 4u);
}

TEST(Logprobs, BadInputIsAnError) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_THROW(logprobs(logits, 2), Error);
  EXPECT_THROW(logprobs(logits, -1), Error);
  EXPECT_THROW(log_softmax(std::vector<float>{}), Error);
  EXPECT_THROW(log_softmax(std::vector<float>{0.0f, NAN}), Error);
}

}  // namespace
}  // namespace jitllm
