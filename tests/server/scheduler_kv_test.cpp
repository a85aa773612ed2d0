// The scheduler under a KV budget (a capped pool, jitllmd --kv-tokens): sequences that outgrow
// the free pages park the ones admitted last (their KV dropped and recomputed), so every job
// finishes with the text it has alone and no step runs out of pages; a prompt larger than the
// whole cache is refused with a 400; cached sessions give way before anyone is parked.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"
#include "server/scheduler_sequence.h"

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

TEST(SchedulerKv, TheSessionAPromptReusesIsNotEvictedToMakeRoomForIt) {
  // A (a long prompt) then B finish and stay cached, A the least recently used, in a cache one
  // page larger than the two hold; A's prompt again with a word more needs room, which must come
  // from B, not from A's session, whose prefix it reuses.
  std::string a;
  for (int i = 0; i < 4; ++i) a += "The function returns a list of the values found in the file. ";
  const std::string b = "A list is";
  const std::string model = testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf");
  auto held_after = [&](Fixture& f, const std::string& prompt) {
    auto job = greedy_job(*f.tok, prompt, 4);
    f.sched->submit(job);
    wait(*job);
    size_t held = 0;
    f.sched->run_exclusive([&](Engine& e, PrefixCache&) { held = e.kv_pool().pages_in_use(); });
    return held;
  };
  size_t cap = 0;
  {
    Fixture probe(1, 2, {}, model, false);  // no cap: what A and B hold
    held_after(probe, a);
    cap = held_after(probe, b) + 1;
  }
  Fixture f(1, 2, {}, model, false, cap);
  const size_t held_a = held_after(f, a);
  ASSERT_GE(held_a, 4u);
  ASSERT_EQ(held_after(f, b) + 1, cap);
  const double cached_before = f.metrics.counter("prompt_tokens_cached_total");
  auto again = greedy_job(*f.tok, a + "Each", 4);
  f.sched->submit(again);
  EXPECT_EQ(wait(*again).usage.completion_tokens, 4);
  EXPECT_GE(f.metrics.counter("prompt_tokens_cached_total") - cached_before, double(16 * (held_a - 1)));
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

// A full KV cache met outside the scheduler's planning (a fork, /v1/systemone) is the server's
// capacity, not the request's fault: 503, retry.
TEST(SchedulerKv, AFullCacheIsA503) {
  const ApiError e = error_of(CapacityError("KV cache is full: all 8 pages of 256 tokens are in use"));
  EXPECT_EQ(e.status(), 503);
  EXPECT_NE(std::string(e.what()).find("retry"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace jitllm::server
