// The whole chain: sampled frequencies against the renormalised probabilities worked out by hand
// (20k draws, 5-sigma binomial tolerance per token), greedy, logit bias, penalties in the chain,
// seeds, chain order, and errors.
#include "sample/sampler_chain.h"

#include "core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include <cmath>
#include <map>
#include <vector>

namespace jitllm {
namespace {

using ::testing::HasSubstr;

// Only the stages a test names are active.
SamplingParams plain(float temperature, uint32_t seed = 1234) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.typical_p = 1.0f;
  p.seed = seed;
  return p;
}

// Same token probabilities as in filters_test: id 3: 1/2, id 0: 1/4, id 4: 1/8, ids 1, 2: 1/16.
std::vector<float> pow2_logits() {
  return {std::log(0.25f), std::log(0.0625f), std::log(0.0625f), std::log(0.5f),
          std::log(0.125f)};
}

// Draws n tokens and checks each token's count against n * expected[id] within 5 binomial sigmas;
// tokens missing from `expected` must never appear.
void expect_frequencies(SamplerChain& chain, const std::vector<float>& logits,
                        const std::map<int32_t, double>& expected, int n = 20000) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[chain.sample(logits)];
  for (const auto& [id, count] : counts) {
    EXPECT_TRUE(expected.count(id)) << "token " << id << " drawn " << count << " times";
  }
  for (const auto& [id, p] : expected) {
    const double mean = n * p;
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(counts[id], mean, 5 * sigma + 1) << "token " << id << " p " << p;
  }
}

TEST(SamplerChain, TopKThenTemperatureDistribution) {
  SamplingParams p = plain(0.7f);
  p.top_k = 4;
  SamplerChain chain(p, 6);
  const std::vector<float> logits = {1.0f, 0.2f, 2.0f, -0.5f, 1.5f, 0.9f};
  // top-4 ids: 2, 4, 0, 5; probabilities softmax(logit / 0.7) over those four.
  const int32_t kept[] = {2, 4, 0, 5};
  double z = 0;
  for (int32_t id : kept) z += std::exp(logits[size_t(id)] / 0.7);
  std::map<int32_t, double> expected;
  for (int32_t id : kept) expected[id] = std::exp(logits[size_t(id)] / 0.7) / z;
  expect_frequencies(chain, logits, expected);
}

TEST(SamplerChain, TopPDistribution) {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.8f;  // cumulative 0.5, 0.75, 0.875: keeps ids 3, 0, 4 -> 4/7, 2/7, 1/7
  SamplerChain chain(p, 5);
  expect_frequencies(chain, pow2_logits(), {{3, 4.0 / 7}, {0, 2.0 / 7}, {4, 1.0 / 7}});
}

TEST(SamplerChain, MinPThenTemperatureDistribution) {
  SamplingParams p = plain(2.0f);
  p.min_p = 0.3f;  // threshold 0.15: ids 3 (1/2) and 0 (1/4); temperature 2 -> p ~ sqrt(p)
  SamplerChain chain(p, 5);
  const double a = std::sqrt(0.5), b = std::sqrt(0.25);
  expect_frequencies(chain, pow2_logits(), {{3, a / (a + b)}, {0, b / (a + b)}});
}

TEST(SamplerChain, TypicalDistribution) {
  SamplingParams p = plain(1.0f);
  p.typical_p = 0.5f;  // keeps ids 0 and 3 (see filters_test): 1/4 and 1/2 -> 1/3, 2/3
  SamplerChain chain(p, 5);
  expect_frequencies(chain, pow2_logits(), {{0, 1.0 / 3}, {3, 2.0 / 3}});
}

TEST(SamplerChain, DefaultChainDistribution) {
  // llama.cpp defaults: top_k 40, top_p 0.95, min_p 0.05, temperature 0.8. Probabilities
  // ids 0..7 = 0.5, 0.3, 0.12, 0.015, 0.015, 0.015, 0.015, 0.02. Sorted cumulative: 0.5, 0.8,
  // 0.92, 0.94 (id 7), 0.955 (id 3, lowest of the tied ids): top-p keeps ids 0, 1, 2, 7, 3.
  // min-p keeps p >= 0.05 * 0.5 = 0.025: ids 0, 1, 2. Temperature 0.8: p^(1/0.8) renormalised.
  SamplingParams p;
  p.seed = 99;
  const std::vector<double> probs = {0.5, 0.3, 0.12, 0.015, 0.015, 0.015, 0.015, 0.02};
  std::vector<float> logits;
  for (double q : probs) logits.push_back(float(std::log(q)));
  SamplerChain chain(p, 8);
  double z = 0;
  for (int i = 0; i < 3; ++i) z += std::pow(probs[size_t(i)], 1 / 0.8);
  std::map<int32_t, double> expected;
  for (int i = 0; i < 3; ++i) expected[i] = std::pow(probs[size_t(i)], 1 / 0.8) / z;
  expect_frequencies(chain, logits, expected);
}

TEST(SamplerChain, TopPThenMinPKeepCounts) {
  // The same logits, one stage at a time, to see each cut where the comment above puts it.
  const std::vector<double> probs = {0.5, 0.3, 0.12, 0.015, 0.015, 0.015, 0.015, 0.02};
  std::vector<float> logits;
  for (double q : probs) logits.push_back(float(std::log(q)));
  SamplingParams p = plain(1.0f);
  p.top_p = 0.95f;
  SamplerChain top_p(p, 8);
  top_p.sample(logits);
  std::vector<int32_t> kept;
  for (const auto& tp : top_p.probabilities()) kept.push_back(tp.id);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 2, 7, 3}));
  SamplingParams m = plain(1.0f);
  m.min_p = 0.05f;
  SamplerChain min_p(m, 8);
  min_p.sample(logits);
  EXPECT_EQ(min_p.probabilities().size(), 3u);
}

TEST(SamplerChain, ProbabilitiesAreTheDistributionDrawnFrom) {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.8f;
  SamplerChain chain(p, 5);
  chain.sample(pow2_logits());
  ASSERT_EQ(chain.probabilities().size(), 3u);
  double sum = 0;
  for (const auto& tp : chain.probabilities()) sum += tp.p;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  const auto top = chain.top_probabilities(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 3);
  EXPECT_NEAR(top[0].p, 4.0 / 7, 1e-6);
  EXPECT_EQ(top[1].id, 0);
  EXPECT_NEAR(top[1].p, 2.0 / 7, 1e-6);
}

TEST(SamplerChain, OrderOfStagesMatters) {
  // Temperature 0.5 squares the probabilities: 1/2, 1/4, 1/8 -> 0.744, 0.186, 0.047 (of the
  // renormalised five). Before top-p 0.8 it leaves 2 tokens; after top-p (default order), 3.
  SamplingParams p = plain(0.5f);
  p.top_p = 0.8f;
  SamplerChain default_order(p, 5);
  default_order.sample(pow2_logits());
  EXPECT_EQ(default_order.probabilities().size(), 3u);
  p.order = parse_sampler_order("temperature,top_p");
  SamplerChain temp_first(p, 5);
  temp_first.sample(pow2_logits());
  EXPECT_EQ(temp_first.probabilities().size(), 2u);
}

TEST(SamplerChain, GreedyTakesLowestIdAmongTies) {
  SamplerChain chain(plain(0.0f), 4);
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(chain.sample(logits), 1);
  ASSERT_EQ(chain.probabilities().size(), 1u);
  EXPECT_EQ(chain.probabilities()[0].id, 1);
  EXPECT_EQ(chain.probabilities()[0].p, 1.0f);
  SamplerChain negative_temp(plain(-1.0f), 4);
  EXPECT_EQ(negative_temp.sample(logits), 1);
}

TEST(SamplerChain, GreedyAppliesPenaltiesAndBias) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  SamplerChain chain(p, 4);
  const std::vector<float> logits = {1.0f, 3.0f, 2.5f, 2.0f};
  EXPECT_EQ(chain.sample(logits), 1);
  chain.accept(1);  // 3.0 / 2 = 1.5 < 2.5
  EXPECT_EQ(chain.sample(logits), 2);
  chain.reset();
  EXPECT_EQ(chain.sample(logits), 1);

  SamplingParams b = plain(0.0f);
  b.logit_bias = {{0, 2.5f}};  // 1.0 + 2.5 = 3.5 > 3.0
  SamplerChain biased(b, 4);
  EXPECT_EQ(biased.sample(logits), 0);
}

TEST(SamplerChain, PenaltiesWithoutTheStageInTheOrderDoNothing) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.order = parse_sampler_order("top_k,temperature");
  SamplerChain chain(p, 3);
  chain.accept(1);
  EXPECT_EQ(chain.sample(std::vector<float>{1.0f, 3.0f, 2.5f}), 1);
}

TEST(SamplerChain, PresencePenaltyShiftsTheDistribution) {
  // Two tokens at equal logits; token 0 was seen, presence 1.0 lowers its logit by 1:
  // p0 = e^-1 / (1 + e^-1).
  SamplingParams p = plain(1.0f);
  p.presence_penalty = 1.0f;
  SamplerChain chain(p, 2);
  chain.accept(0);
  const double p0 = std::exp(-1.0) / (1 + std::exp(-1.0));
  expect_frequencies(chain, {0.5f, 0.5f}, {{0, p0}, {1, 1 - p0}});
}

TEST(SamplerChain, LogitBiasMinusInfinityBans) {
  SamplingParams p = plain(1.0f);
  p.logit_bias = {{3, -INFINITY}};  // ban the most likely token (1/2)
  SamplerChain chain(p, 5);
  // Remaining 1/4, 1/16, 1/16, 1/8 renormalised by 1/2.
  expect_frequencies(chain, pow2_logits(), {{0, 0.5}, {1, 0.125}, {2, 0.125}, {4, 0.25}});
  SamplingParams g = plain(0.0f);
  g.logit_bias = {{3, -INFINITY}};
  SamplerChain greedy(g, 5);
  EXPECT_EQ(greedy.sample(pow2_logits()), 0);
}

TEST(SamplerChain, EverythingBannedIsAnError) {
  SamplingParams p = plain(1.0f);
  p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
  SamplerChain chain(p, 2);
  EXPECT_THROW(chain.sample(std::vector<float>{0.0f, 1.0f}), Error);
  p.temperature = 0.0f;
  SamplerChain greedy(p, 2);
  EXPECT_THROW(greedy.sample(std::vector<float>{0.0f, 1.0f}), Error);
}

std::vector<int32_t> draw_sequence(SamplerChain& chain, int n) {
  const std::vector<float> flat(50, 0.0f);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(chain.sample(flat));
  return out;
}

TEST(SamplerChain, SameSeedSameTokensOtherSeedOthers) {
  SamplerChain a(plain(1.0f, 42), 50), b(plain(1.0f, 42), 50), c(plain(1.0f, 43), 50);
  const auto seq_a = draw_sequence(a, 200);
  EXPECT_EQ(seq_a, draw_sequence(b, 200));
  EXPECT_NE(seq_a, draw_sequence(c, 200));
  a.reset();
  EXPECT_EQ(seq_a, draw_sequence(a, 200));
}

TEST(SamplerChain, RandomSeedIsReportedAndRepeatable) {
  SamplerChain a(plain(1.0f, SamplingParams::kRandomSeed), 50);
  SamplerChain b(plain(1.0f, a.seed()), 50);
  EXPECT_EQ(draw_sequence(a, 100), draw_sequence(b, 100));
}

TEST(SamplerChain, BadInputIsAnError) {
  EXPECT_THROW(SamplerChain(plain(1.0f), 0), Error);
  SamplingParams bias = plain(1.0f);
  bias.logit_bias = {{7, 1.0f}};
  try {
    SamplerChain chain(bias, 5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("logit_bias token 7"));
  }
  SamplingParams rep = plain(1.0f);
  rep.repeat_penalty = 0.0f;
  EXPECT_THROW(SamplerChain(rep, 5), Error);
  SamplingParams nan_temp = plain(NAN);
  EXPECT_THROW(SamplerChain(nan_temp, 5), Error);

  SamplerChain chain(plain(1.0f), 5);
  EXPECT_THROW(chain.sample(std::vector<float>(4, 0.0f)), Error);
  EXPECT_THROW(chain.sample(std::vector<float>{0, 0, NAN, 0, 0}), Error);
  EXPECT_THROW(chain.accept(5), Error);
  EXPECT_THROW(chain.accept(-1), Error);
}

TEST(SamplerChain, APaddedHeadPastTheTokenizerIsNeverSampled) {
  // 8 logits, 5 tokens: the padding ids hold the largest logits and still never come out.
  const std::vector<float> logits = {0.1f, 0.5f, 0.2f, 0.3f, 0.4f, 9.0f, 9.0f, 9.0f};
  SamplerChain greedy(plain(0.0f), 5);
  EXPECT_EQ(greedy.sample(logits), 1);
  SamplerChain hot(plain(2.0f, 99), 5);
  for (int i = 0; i < 2000; ++i) EXPECT_LT(hot.sample(logits), 5);
  // Fewer logits than tokens is a caller's error.
  EXPECT_THROW(greedy.sample(std::vector<float>(4, 0.0f)), Error);
}

// Greedy without penalties is read straight off the logits; it must pick what the full chain
// picks (a repeat penalty with nothing accepted yet changes no logit but takes the full chain):
// ties to the lower id, masks, biases on the best token or beside it, -inf bans.

TEST(SamplerChainMask, OnlyAllowedTokensComeOutGreedyOrDrawn) {
  const std::vector<float> logits = {5.0f, 1.0f, 4.0f, 0.5f, 3.0f};  // argmax 0
  const std::vector<uint64_t> allowed = {0b10110};                  // tokens 1, 2, 4
  SamplingParams greedy_params;
  greedy_params.temperature = 0.0f;
  SamplerChain greedy(greedy_params, 5);
  EXPECT_EQ(greedy.sample(logits), 0);
  EXPECT_EQ(greedy.sample(logits, allowed), 2);  // the best allowed one
  // Drawn: frequencies follow the softmax over the allowed tokens only.
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  SamplerChain chain(p, 5);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 4000; ++i) ++seen[chain.sample(logits, allowed)];
  EXPECT_EQ(seen.count(0) + seen.count(3), 0u);
  const double z = std::exp(1.0) + std::exp(4.0) + std::exp(3.0);
  EXPECT_NEAR(seen[2] / 4000.0, std::exp(4.0) / z, 0.03);
  EXPECT_NEAR(seen[4] / 4000.0, std::exp(3.0) / z, 0.03);
}

TEST(SamplerChainMask, NothingAllowedOrAShortMaskIsAnError) {
  const std::vector<float> logits(70, 0.0f);
  SamplingParams p;
  p.temperature = 0.0f;
  SamplerChain chain(p, 70);
  const std::vector<uint64_t> none = {0, 0};
  EXPECT_THROW(chain.sample(logits, none), Error);
  const std::vector<uint64_t> short_mask = {~uint64_t(0)};  // 64 bits for 70 tokens
  EXPECT_THROW(chain.sample(logits, short_mask), Error);
  const std::vector<uint64_t> last = {0, uint64_t(1) << 5};  // token 69
  EXPECT_EQ(chain.sample(logits, last), 69);
}

// Greedy without penalties is read straight off the logits; it must pick what the full chain
// picks (a repeat penalty with nothing accepted yet changes no logit but takes the full chain):
// ties to the lower id, masks, biases on the best token or beside it, -inf bans.
TEST(SamplerChainGreedy, TheDirectPickEqualsTheFullChain) {
  std::mt19937 rng(11);
  const int32_t n = 300;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<float> logits(n);
    for (float& x : logits) x = float(int(rng() % 16)) * 0.5f;  // many ties
    SamplingParams direct;
    direct.temperature = 0.0f;
    for (int b = 0; b < int(rng() % 4); ++b) {
      const int32_t t = int32_t(rng() % n);
      direct.logit_bias[t] = (rng() % 5 == 0) ? -INFINITY : float(int(rng() % 9) - 4);
    }
    if (trial % 3 == 0) {  // a bias on the raw best
      const int32_t top = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      direct.logit_bias[top] = -2.0f;
    }
    SamplingParams full = direct;
    full.repeat_penalty = 1.5f;
    std::vector<uint64_t> mask((n + 63) / 64, 0);
    for (int32_t t = 0; t < n; ++t)
      if (rng() % 3) mask[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
    SamplerChain a(direct, n), b(full, n);
    EXPECT_EQ(a.sample(logits), b.sample(logits)) << trial;
    EXPECT_EQ(a.sample(logits, mask), b.sample(logits, mask)) << trial;
  }
  SamplingParams p;
  p.temperature = 0.0f;
  SamplerChain chain(p, 4);
  EXPECT_THROW(chain.sample(std::vector<float>{0.0f, NAN, 1.0f, 0.0f}), ModelOutputError);
  p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
  SamplerChain banned(p, 2);
  EXPECT_THROW(banned.sample(std::vector<float>{1.0f, 2.0f}), Error);
}

}  // namespace
}  // namespace jitllm
