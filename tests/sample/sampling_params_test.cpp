// Stage names, llama.cpp's default order, and the seeded RNG's platform-independent output.
#include "sample/rng.h"
#include "sample/sampling_params.h"

#include "core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace jitllm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SamplingParams, DefaultsMatchLlamaCpp) {
  // llama.cpp common_params_sampling defaults (b10472 common/common.h).
  const SamplingParams p;
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.typical_p, 1.0f);
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.penalty_last_n, 64);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  using S = SamplerStage;
  EXPECT_THAT(p.order, ElementsAre(S::Penalties, S::Dry, S::TopK, S::TypicalP, S::TopP, S::MinP,
                                   S::Xtc, S::Temperature));
}

TEST(SamplingParams, ParsesStageNamesAndAliases) {
  using S = SamplerStage;
  EXPECT_THAT(parse_sampler_order("penalties, top_k;typ_p,nucleus,min_p,temp"),
              ElementsAre(S::Penalties, S::TopK, S::TypicalP, S::TopP, S::MinP, S::Temperature));
  EXPECT_THAT(parse_sampler_order(""), ElementsAre());
  EXPECT_EQ(sampler_stage_name(S::TypicalP), "typ_p");
  try {
    parse_sampler_order("top_k,topp");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'topp'"));
    EXPECT_THAT(e.what(), HasSubstr("top_p"));
  }
}

TEST(SamplingParams, ValidationNamesTheField) {
  SamplingParams p;
  p.penalty_last_n = -2;
  try {
    validate_sampling_params(p, 10);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("penalty_last_n"));
  }
  SamplingParams q;
  q.logit_bias = {{3, INFINITY}};
  EXPECT_THROW(validate_sampling_params(q, 10), Error);
  q.logit_bias = {{3, -INFINITY}};
  EXPECT_NO_THROW(validate_sampling_params(q, 10));
}

TEST(SampleRng, FollowsTheStandardMt19937) {
  // The C++ standard fixes mt19937's output: with the default seed 5489 the 10000th number is
  // 4123659995 ([rand.predef]); the first two are 3499211612 and 581869302 (MT reference output).
  SampleRng rng(5489);
  uint32_t x = 0;
  for (int i = 0; i < 10000; ++i) x = rng.next_u32();
  EXPECT_EQ(x, 4123659995u);

  SampleRng fresh(5489);
  const uint64_t a = 3499211612u >> 5, b = 581869302u >> 6;
  EXPECT_EQ(fresh.uniform(), double((a << 26) | b) / 9007199254740992.0);
}

TEST(SampleRng, UniformIsInUnitIntervalWithMeanOneHalf) {
  SampleRng rng(7);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of n uniforms: sd = sqrt(1/12/n) ~ 9.1e-4; 5 sigma.
  EXPECT_NEAR(sum / n, 0.5, 5 * 9.2e-4);
}

}  // namespace
}  // namespace jitllm
