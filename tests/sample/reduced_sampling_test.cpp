// SamplerChain::sample_reduced against sample() on the whole row: two chains with the same
// settings and seed draw from the same rows, one from the whole row, one from the reduced row
// its reduction() asks for (selected here by a plain sort, as a card's pick must select it), and
// must choose the same tokens with the same probabilities, over many steps whose accepted
// tokens fill the penalty window. Rows are drawn with many exact ties (logits on a 0.25 grid)
// and some -inf, and the settings include penalties and biases that raise tokens from the
// bottom of the row (repeat penalty < 1, negative presence, positive bias), the case the reduced
// row's touched tokens are there for.
#include "sample/sampler_chain.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace jitllm {
namespace {

constexpr int32_t kVocab = 3000;

std::vector<float> row_of_ties(std::mt19937& rng) {
  std::uniform_int_distribution<int> grid(-40, 20);
  std::uniform_int_distribution<int> hole(0, 49);
  std::vector<float> row(kVocab);
  for (float& x : row) x = hole(rng) == 0 ? -INFINITY : 0.25f * float(grid(rng));
  return row;
}

// The reduced row: the `top` best by logit_before, and the touched tokens not among them.
std::vector<Candidate> reduce(const std::vector<float>& row, const SamplerChain::Reduction& r) {
  std::vector<Candidate> all(row.size());
  for (size_t i = 0; i < row.size(); ++i) all[i] = {int32_t(i), row[i], 0.0f};
  std::sort(all.begin(), all.end(), logit_before);
  std::vector<Candidate> out(all.begin(), all.begin() + r.top);
  for (const int32_t t : r.touched)
    if (std::none_of(out.begin(), out.end(), [&](const Candidate& c) { return c.id == t; }))
      out.push_back({t, row[size_t(t)], 0.0f});
  std::shuffle(out.begin(), out.end(), std::mt19937(7));  // any order
  return out;
}

// The two chains drew the same token with the same probabilities; both accept it.
void expect_same_draw(SamplerChain& whole, SamplerChain& reduced, int32_t a, int32_t b,
                      const char* name, int step) {
  ASSERT_EQ(a, b) << name << " step " << step;
  const auto pa = whole.probabilities(), pb = reduced.probabilities();
  ASSERT_EQ(pa.size(), pb.size()) << name << " step " << step;
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].id, pb[i].id) << name << " step " << step;
    ASSERT_EQ(pa[i].p, pb[i].p) << name << " step " << step;
  }
  whole.accept(a);
  reduced.accept(b);
}

struct Setting {
  const char* name;
  SamplingParams params;
};

std::vector<Setting> settings() {
  std::vector<Setting> out;
  auto base = [](float t, int32_t k) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = k;
    p.seed = 99;
    return p;
  };
  out.push_back({"defaults", base(0.8f, 40)});
  out.push_back({"greedy", base(0.0f, 40)});
  out.push_back({"top_k 1", base(1.0f, 1)});
  SamplingParams p = base(1.3f, 25);
  p.top_p = 0.8f;
  p.min_p = 0.0f;
  p.typical_p = 0.9f;
  p.min_keep = 3;
  out.push_back({"typical and top_p", p});
  p = base(0.7f, 40);
  p.repeat_penalty = 0.7f;  // raises the window's negative logits... and lowers positive ones
  p.presence_penalty = -2.0f;  // raises every window token
  p.frequency_penalty = 0.3f;
  p.penalty_last_n = 32;
  out.push_back({"penalties that raise", p});
  p = base(0.0f, 0);
  p.repeat_penalty = 1.5f;
  p.frequency_penalty = -1.0f;
  p.penalty_last_n = -1;
  out.push_back({"greedy with penalties", p});
  p = base(0.9f, 10);
  p.logit_bias = {{17, 30.0f}, {2999, 12.5f}, {5, -INFINITY}, {0, -3.0f}};
  out.push_back({"logit bias", p});
  p.temperature = 0.0f;
  out.push_back({"greedy with logit bias", p});
  p = base(0.9f, 64);
  p.order = parse_sampler_order("top_k,penalties,min_p,temperature");
  p.presence_penalty = -1.0f;
  p.logit_bias = {{123, 8.0f}};
  out.push_back({"top_k before penalties", p});
  return out;
}

TEST(ReducedSampling, DrawsWhatTheWholeRowDraws) {
  for (const Setting& s : settings()) {
    SamplerChain whole(s.params, kVocab), reduced(s.params, kVocab);
    std::mt19937 rng(20261207);
    for (int32_t t : {3, 17, 17, 2999, 40}) {  // a prompt in the penalty window
      whole.accept(t);
      reduced.accept(t);
    }
    int steps = 0;
    for (int step = 0; step < 300; ++step) {
      const std::vector<float> row = row_of_ties(rng);
      const std::optional<SamplerChain::Reduction> r = reduced.reduction(1024);
      ASSERT_TRUE(r) << s.name;
      EXPECT_TRUE(std::is_sorted(r->touched.begin(), r->touched.end()));
      const int32_t a = whole.sample(row);
      const int32_t b = reduced.sample_reduced(reduce(row, *r));
      ASSERT_NO_FATAL_FAILURE(expect_same_draw(whole, reduced, a, b, s.name, step));
      ++steps;
    }
    EXPECT_EQ(steps, 300) << s.name;
  }
}

// With a grammar's mask: the reduced row is chosen as if masked tokens were -inf (and carries
// them as -inf), and the draw equals sample(row, mask) over the whole row.
TEST(ReducedSampling, WithAMaskDrawsWhatTheMaskedRowDraws) {
  for (const Setting& s : settings()) {
    SamplerChain whole(s.params, kVocab), reduced(s.params, kVocab);
    std::mt19937 rng(77);
    std::bernoulli_distribution keep(0.1);
    for (int step = 0; step < 100; ++step) {
      std::vector<float> row = row_of_ties(rng);
      std::vector<uint64_t> mask((kVocab + 63) / 64, 0);
      for (int32_t t = 0; t < kVocab; ++t)
        if (keep(rng) || t == 17) mask[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
      std::vector<float> masked = row;
      for (int32_t t = 0; t < kVocab; ++t)
        if (!((mask[size_t(t) >> 6] >> (t & 63)) & 1)) masked[size_t(t)] = -INFINITY;
      const std::optional<SamplerChain::Reduction> r = reduced.reduction(1024);
      ASSERT_TRUE(r) << s.name;
      const int32_t a = whole.sample(row, mask);
      const int32_t b = reduced.sample_reduced(reduce(masked, *r), mask);
      ASSERT_NO_FATAL_FAILURE(expect_same_draw(whole, reduced, a, b, s.name, step));
    }
  }
}

TEST(ReducedSampling, AsksForTheBestAndTheTouchedTokens) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.repeat_penalty = 1.1f;
  p.logit_bias = {{9, 1.0f}, {4, -1.0f}};
  SamplerChain chain(p, kVocab);
  for (int32_t t : {4, 100, 100, 7}) chain.accept(t);
  const std::optional<SamplerChain::Reduction> r = chain.reduction(1024);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->touched, (std::vector<int32_t>{4, 7, 9, 100}));
  EXPECT_EQ(r->top, 40 + 4);
  // Neutral penalties leave the window out.
  p.repeat_penalty = 1.0f;
  SamplerChain neutral(p, kVocab);
  neutral.accept(100);
  EXPECT_EQ(neutral.reduction(1024)->touched, (std::vector<int32_t>{4, 9}));
  // Greedy: the best one and the touched.
  p.temperature = 0.0f;
  p.top_k = 0;
  EXPECT_EQ(SamplerChain(p, kVocab).reduction(1024)->top, 1 + 2);
}

TEST(ReducedSampling, TheWholeRowWhereNoReductionIsExact) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 0;  // drawn over the whole vocabulary
  EXPECT_FALSE(SamplerChain(p, kVocab).reduction(1024));
  p.top_k = 40;
  p.order = parse_sampler_order("temperature,top_k");  // dividing can tie distinct logits
  EXPECT_FALSE(SamplerChain(p, kVocab).reduction(1024));
  p.order = parse_sampler_order("min_p,top_k,temperature");
  EXPECT_FALSE(SamplerChain(p, kVocab).reduction(1024));
  p.order = parse_sampler_order("top_p,temperature");  // no top_k at all
  EXPECT_FALSE(SamplerChain(p, kVocab).reduction(1024));
  p = SamplingParams{};
  p.top_k = 2000;
  EXPECT_FALSE(SamplerChain(p, kVocab).reduction(1024));  // past what a pick brings
  p.top_k = kVocab;
  EXPECT_FALSE(SamplerChain(p, kVocab).reduction(4096));  // the whole row anyway
}

TEST(ReducedSampling, RefusesWhatTheWholeRowRefuses) {
  SamplingParams p;
  p.temperature = 0.0f;
  SamplerChain chain(p, kVocab);
  EXPECT_THROW(chain.sample_reduced(std::vector<Candidate>{{1, NAN, 0}, {2, 1.0f, 0}}),
               ModelOutputError);
  EXPECT_THROW(chain.sample_reduced(std::vector<Candidate>{{1, INFINITY, 0}}), ModelOutputError);
  EXPECT_THROW(chain.sample_reduced(std::vector<Candidate>{{kVocab, 1.0f, 0}}), Error);
  EXPECT_THROW(chain.sample_reduced(std::vector<Candidate>{{3, -INFINITY, 0}}), Error);
}

}  // namespace
}  // namespace jitllm
