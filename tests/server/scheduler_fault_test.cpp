// Faults inside the scheduler thread end the job they belong to and nothing else: a throw in a
// step, in the sampler or in the detokenizer (injected through SchedulerOptions::fault_hook), a
// throw of something that is not a std::exception, and a model whose logits come out NaN for one
// token. Each time the scheduler goes on serving the other jobs and the ones after.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "server/scheduler_fixture.h"

namespace jitllm::server {
namespace {

// A hook that throws `what` at the `nth` call for stage `where` (1-based), and never again.
std::function<void(std::string_view)> throw_once(std::string where, int nth,
                                                 std::function<void()> what) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  return [=](std::string_view stage) {
    if (stage == where && ++*calls == nth) what();
  };
}

void expect_serving(Fixture& f) {
  auto after = greedy_job(*f.tok, "A list is", 6);
  f.sched->submit(after);
  const Result r = wait(*after);
  EXPECT_FALSE(r.text[0].empty());
  EXPECT_EQ(r.finish[0], "length");
}

TEST(SchedulerFault, AThrowInAStepEndsThatStepsJobsWith500) {
  Fixture f(2, 8, throw_once("step", 1, [] { throw Error("injected step fault"); }));
  auto job = greedy_job(*f.tok, "The function returns", 8);
  f.sched->submit(job);
  const ApiError e = wait_error(*job);
  EXPECT_EQ(e.status(), 500);
  EXPECT_NE(std::string(e.what()).find("injected step fault"), std::string::npos) << e.what();
  expect_serving(f);
  // The last job's seats are returned just after it finished.
  for (int i = 0; i < 100 && f.sched->in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(f.sched->in_flight(), 0u);
}

// Two jobs share every step; the sampler throws for whichever it samples first. That job ends
// with 500, the other one runs to its length.
void one_of_two_fails(const char* stage, std::function<void()> what) {
  Fixture f(2, 8, throw_once(stage, 3, std::move(what)));
  auto a = greedy_job(*f.tok, "The function returns", 8);
  auto b = greedy_job(*f.tok, "The class", 8);
  f.sched->submit(a);
  f.sched->submit(b);
  bool done_a = false, done_b = false;
  for (int spins = 0; (!done_a || !done_b) && spins < 600; ++spins) {
    a->take(std::chrono::milliseconds(50), done_a);
    b->take(std::chrono::milliseconds(50), done_b);
  }
  ASSERT_TRUE(done_a && done_b);
  EXPECT_NE(a->error.has_value(), b->error.has_value()) << "exactly one job fails";
  const Job& failed = a->error ? *a : *b;
  const Job& fine = a->error ? *b : *a;
  EXPECT_EQ(failed.error->status(), 500);
  EXPECT_EQ(fine.usage.completion_tokens, 8);
  expect_serving(f);
}

TEST(SchedulerFault, AThrowInTheSamplerEndsOnlyItsJob) {
  one_of_two_fails("sample", [] { throw Error("injected sampler fault"); });
}

TEST(SchedulerFault, AThrowInTheDetokenizerEndsOnlyItsJob) {
  one_of_two_fails("detokenize", [] { throw std::runtime_error("injected detokenizer fault"); });
}

TEST(SchedulerFault, NonStandardThrowEndsTheRunningJobsNotTheThread) {
  Fixture f(2, 8, throw_once("sample", 1, [] { throw 42; }));
  auto job = greedy_job(*f.tok, "The function returns", 8);
  f.sched->submit(job);
  EXPECT_EQ(wait_error(*job).status(), 500);
  expect_serving(f);
}

TEST(SchedulerFault, NaNLogitsEndThatRequestWith500AndTheOthersRunOn) {
  Fixture clean(1);
  const std::vector<int32_t> ids = clean.tok->encode("The function returns", true);
  const int32_t poisoned = ids.at(1);
  const std::string path = write_nan_embedding_model(poisoned);
  if (path.empty()) GTEST_SKIP() << "the fixture's token_embd type cannot be poisoned here";
  Fixture f(2, 8, {}, path);
  auto bad = greedy_job(*f.tok, "The function returns", 8);
  auto good = greedy_job(*f.tok, "A list is", 8);
  ASSERT_EQ(std::count(good->prompt.begin(), good->prompt.end(), poisoned), 0);
  f.sched->submit(bad);
  f.sched->submit(good);
  const ApiError e = wait_error(*bad);
  EXPECT_EQ(e.status(), 500);
  EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  const Result r = wait(*good);
  EXPECT_EQ(r.finish[0], "length");
  expect_serving(f);
  std::filesystem::remove(path);
}

TEST(SchedulerSeats, ChoicesCountAgainstParallel) {
  // -parallel 2 and three jobs of n = 2: never more than two sequences in a step.
  Fixture f(2);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 3; ++i) {
    auto job = greedy_job(*f.tok, "The module provides", 4);
    job->n = 2;
    job->sampling.temperature = 0.8f;
    job->sampling.seed = uint32_t(7 + i);
    jobs.push_back(job);
    f.sched->submit(job);
  }
  for (auto& job : jobs) EXPECT_EQ(wait(*job).finish.size(), 2u);
  const std::string text = f.metrics.render();
  const auto count = [&](const std::string& series) {
    const size_t at = text.find(series + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size() + 1));
  };
  EXPECT_GT(count("jitllm_batch_size_count"), 0);
  EXPECT_EQ(count("jitllm_batch_size_bucket{le=\"2\"}"), count("jitllm_batch_size_count"));
}

}  // namespace
}  // namespace jitllm::server
