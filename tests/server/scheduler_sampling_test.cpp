// The scheduler's sampled draws from picked rows (SamplerChain::reduction + Engine::step_picked)
// against the host sampler over whole rows: a seeded job with top-k, penalties that raise and
// lower tokens, a logit bias (one raised, one banned) and top logprobs gives the same tokens and
// the same logprobs (bit for bit on the CPU) as a plain loop of Engine::prefill / decode,
// SamplerChain::sample and sample/logprobs.h; a drawn job under a grammar gives the same tokens as
// the loop sampling with the grammar's masks.
#include <gtest/gtest.h>

#include <cmath>

#include "app/grammar_vocabulary.h"
#include "constrain/gbnf.h"
#include "sample/logprobs.h"
#include "sample/sampler_chain.h"
#include "server/scheduler_fixture.h"

namespace jitllm::server {
namespace {

struct Drawn {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<float>> top;  // the top logprobs of each token
};

Drawn drain(Job& job) {
  Drawn d;
  bool done = false;
  for (int spins = 0; !done && spins < 600; ++spins)
    for (JobEvent& ev : job.take(std::chrono::milliseconds(100), done))
      for (const TokenLogprobInfo& t : ev.tokens) {
        d.ids.push_back(t.id);
        d.logprobs.push_back(t.logprob);
        d.top.emplace_back();
        for (const auto& [piece, lp] : t.top) d.top.back().push_back(lp);
      }
  EXPECT_TRUE(done);
  EXPECT_FALSE(job.error.has_value()) << (job.error ? job.error->what() : "");
  return d;
}

SamplingParams sampled() {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 20;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.repeat_penalty = 1.5f;      // pushes the window's tokens out of the best 20...
  p.presence_penalty = 1.0f;
  p.frequency_penalty = -0.3f;  // ...and pulls tokens seen often back up
  p.penalty_last_n = 32;
  p.seed = 4321;
  return p;
}

TEST(SchedulerSampling, DrawsAndLogprobsEqualTheHostSamplerOnWholeRows) {
  Fixture f(2);
  const std::vector<int32_t> prompt = f.tok->encode("The function returns", true);
  SamplingParams sp = sampled();
  sp.logit_bias = {{prompt.back(), 4.0f}, {int32_t(f.tok->n_vocab() - 1), -INFINITY}};
  const int n = 24;
  // The reference: whole rows, the host sampler, logprobs of the raw row.
  Drawn want;
  {
    const int32_t n_tokens = int32_t(std::min<size_t>(f.tok->n_vocab(), size_t(f.engine->config().n_vocab)));
    SamplerChain chain(sp, n_tokens);
    for (int32_t t : prompt) chain.accept(t);
    auto s = f.engine->new_session();
    std::vector<float> logits = f.engine->prefill(*s, prompt, false, 64);
    for (int i = 0; i < n; ++i) {
      const std::span<const float> row = std::span<const float>(logits).first(size_t(n_tokens));
      const int32_t t = chain.sample(row);
      if (f.tok->vocab().is_eog(t)) break;
      want.ids.push_back(t);
      want.logprobs.push_back(logprobs(row, t));
      want.top.emplace_back();
      for (const TokenLogprob& lp : top_logprobs(row, 3)) want.top.back().push_back(lp.logprob);
      chain.accept(t);
      logits = f.engine->decode(*s, t);
    }
  }
  ASSERT_GT(want.ids.size(), 4u);
  auto job = std::make_shared<Job>();
  job->prompt = prompt;
  job->max_tokens = n;
  job->sampling = sp;
  job->logprobs = true;
  job->top_logprobs = 3;
  f.sched->submit(job);
  const Drawn got = drain(*job);
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.logprobs, want.logprobs);
  EXPECT_EQ(got.top, want.top);
}

// Under a grammar (many tokens allowed: lowercase words), a drawn job sends the grammar's mask
// with its pick; the tokens equal the loop's masked host sampling. `copies` jobs run together
// (their masks then computed on the pool), each with its own matcher.
void expect_grammar_draws_equal_the_host_sampler(int copies) {
  Fixture f(copies);
  const std::string gbnf = R"(root ::= [a-z ]+)";
  auto make_matcher = [&] {
    return std::make_shared<constrain::Matcher>(constrain::parse_gbnf(gbnf),
                                                app::make_grammar_vocabulary(*f.tok, f.tok->n_vocab()));
  };
  const std::vector<int32_t> prompt = f.tok->encode("A list is", true);
  const SamplingParams sp = sampled();
  const int n = 16;
  std::vector<int32_t> want;
  {
    const int32_t n_tokens = int32_t(std::min<size_t>(f.tok->n_vocab(), size_t(f.engine->config().n_vocab)));
    SamplerChain chain(sp, n_tokens);
    for (int32_t t : prompt) chain.accept(t);
    auto m = make_matcher();
    constrain::Matcher::State state = m->start();
    auto s = f.engine->new_session();
    std::vector<float> logits = f.engine->prefill(*s, prompt, false, 64);
    for (int i = 0; i < n; ++i) {
      const int32_t t = chain.sample(std::span<const float>(logits).first(size_t(n_tokens)), m->mask(state));
      if (f.tok->vocab().is_eog(t)) break;
      want.push_back(t);
      state = m->advance(state, t);
      ASSERT_NE(state, constrain::Matcher::kDead);
      if (m->finished(state)) break;
      chain.accept(t);
      logits = f.engine->decode(*s, t);
    }
  }
  ASSERT_GT(want.size(), 4u);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int c = 0; c < copies; ++c) {
    auto job = std::make_shared<Job>();
    job->prompt = prompt;
    job->max_tokens = n;
    job->sampling = sp;
    job->logprobs = false;
    job->matcher = make_matcher();
    jobs.push_back(job);
    f.sched->submit(job);
  }
  StreamDecoder d(*f.tok);
  for (int32_t t : prompt) d.push(t);
  std::string want_text;
  for (int32_t t : want) want_text += d.push(t);
  want_text += d.finish();
  for (auto& job : jobs) {
    // Token ids come with logprobs only; compare the text instead.
    bool done = false;
    std::string text;
    for (int spins = 0; !done && spins < 600; ++spins)
      for (JobEvent& ev : job->take(std::chrono::milliseconds(100), done)) text += ev.text;
    ASSERT_TRUE(done);
    ASSERT_FALSE(job->error.has_value()) << job->error->what();
    EXPECT_EQ(text, want_text);
  }
  EXPECT_GT(f.metrics.histogram_count("grammar_seconds"), 0u);
}

TEST(SchedulerSampling, DrawsUnderAGrammarEqualTheHostSamplerWithItsMasks) {
  expect_grammar_draws_equal_the_host_sampler(1);
}

TEST(SchedulerSampling, GrammarDrawsOfSeveralJobsTogetherEachEqualTheHostSampler) {
  expect_grammar_draws_equal_the_host_sampler(4);
}

}  // namespace
}  // namespace jitllm::server
