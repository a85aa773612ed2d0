// The scheduler under a KV budget (a capped pool, jitllmd --kv-tokens): sequences that outgrow
// the free pages park the ones admitted last (their KV dropped and recomputed), so every job
// finishes with the text it has alone and no step runs out of pages; a prompt larger than the
// whole cache is refused with a 400; cached sessions give way before anyone is parked.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace jitllm::server {
namespace {

const std::vector<std::string> kPrompts = {"The function returns", "A list is", "To open a file",
                                           "The module provides"};

std::vector<std::string> run_all(Fixture& f, int max_tokens) {
  std::vector<std::shared_ptr<Job>> jobs;
  for (const std::string& p : kPrompts) {
    jobs.push_back(greedy_job(*f.tok, p, max_tokens));
    f.sched->submit(jobs.back());
  }
  std::vector<std::string> texts;
  for (auto& j : jobs) {
    const Result r = wait(*j);
    texts.push_back(r.text.at(0));
    EXPECT_EQ(r.usage.completion_tokens, max_tokens) << r.text.at(0);
  }
  return texts;
}

TEST(SchedulerKv, AFullCacheParksTheLastAdmittedAndEveryJobEndsAsAlone) {
  // 4 sequences of ~5-token prompts and 44 tokens each hold 4 pages of 16 at the end: 16 pages.
  // The budget is 7, so sequences are parked and brought back again and again.
  const int kTokens = 44;
  std::vector<std::string> alone;
  {
    Fixture f(1);
    for (const std::string& p : kPrompts) {
      auto job = greedy_job(*f.tok, p, kTokens);
      f.sched->submit(job);
      alone.push_back(wait(*job).text.at(0));
    }
  }
  Fixture f(4, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), true, 7);
  const std::vector<std::string> together = run_all(f, kTokens);
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_EQ(together[i], alone[i]) << kPrompts[i];
  EXPECT_GT(f.metrics.counter("sequences_preempted_total"), 0);
  EXPECT_LE(f.engine->kv_pool().pages_allocated(), 7u);
  // Everything finished: only the prefix cache holds pages now.
  f.sched->run_exclusive([](Engine& e, PrefixCache& cache) {
    cache.clear();
    EXPECT_EQ(e.kv_pool().pages_in_use(), 0u);
  });
}

TEST(SchedulerKv, CachedSessionsGiveWayBeforeAnyoneIsParked) {
  // A budget of 8 pages: 2 sequences of 3 pages fit with room to spare, but 8 cached sessions
  // would hold far more than 8 pages: they are evicted, and nobody is parked.
  Fixture f(2, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), true, 8);
  for (int round = 0; round < 4; ++round) {
    auto a = greedy_job(*f.tok, kPrompts[size_t(round)], 30);
    auto b = greedy_job(*f.tok, kPrompts[size_t(3 - round)] + " here", 30);
    f.sched->submit(a);
    f.sched->submit(b);
    wait(*a);
    wait(*b);
  }
  EXPECT_EQ(f.metrics.counter("sequences_preempted_total"), 0);
  EXPECT_LE(f.engine->kv_pool().pages_allocated(), 8u);
}

TEST(SchedulerKv, ChoicesAndALongRunnerUnderASmallCacheAllFinish) {
  // Two jobs: a long-running one and then one of 3 choices whose fork copies its prompt's pages
  // right after its last chunk, in a cache of 6 pages.
  Fixture f(4, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), true, 6);
  auto runner = greedy_job(*f.tok, "The module provides", 40);
  f.sched->submit(runner);
  auto choices = greedy_job(*f.tok, "A list is", 24);
  choices->n = 3;
  f.sched->submit(choices);
  const Result r = wait(*choices);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.text[size_t(i)], r.text[0]) << "greedy choices agree";
  EXPECT_EQ(r.usage.completion_tokens, 3 * 24);
  EXPECT_EQ(wait(*runner).usage.completion_tokens, 40);
}

TEST(SchedulerKv, AForkIsPlannedInTheStepItsPromptEnds) {
  // 6 pages: a job of 3 choices (1 prompt page, 2 more when it forks) and four one-page jobs are
  // admitted together; their first step needs 5 pages and the fork 2 more, so the job admitted
  // last is parked for it instead of the fork failing.
  Fixture f(8, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), true, 6);
  auto choices = greedy_job(*f.tok, "A list is", 8);
  choices->n = 3;
  f.sched->submit(choices);
  std::vector<std::shared_ptr<Job>> others;
  for (const std::string& p : kPrompts) {
    others.push_back(greedy_job(*f.tok, p, 8));
    f.sched->submit(others.back());
  }
  EXPECT_EQ(wait(*choices).usage.completion_tokens, 3 * 8);
  for (auto& j : others) EXPECT_EQ(wait(*j).usage.completion_tokens, 8);
}

TEST(SchedulerKv, APromptLargerThanTheWholeCacheIsRefused) {
  Fixture f(2, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), true, 2);
  std::string longer;
  for (int i = 0; i < 20; ++i) longer += "The function returns a list of values. ";
  auto job = greedy_job(*f.tok, longer, 4);
  ASSERT_GT(job->prompt.size(), 32u);
  f.sched->submit(job);
  const ApiError e = wait_error(*job);
  EXPECT_EQ(e.status(), 400) << e.what();
  EXPECT_NE(std::string(e.what()).find("KV cache holds 2"), std::string::npos) << e.what();
  // The next request that fits runs.
  auto small = greedy_job(*f.tok, "A list is", 4);
  f.sched->submit(small);
  EXPECT_EQ(wait(*small).usage.completion_tokens, 4);
}

}  // namespace
}  // namespace jitllm::server
