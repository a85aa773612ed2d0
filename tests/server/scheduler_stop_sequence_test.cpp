// The scheduler tells which stop string ended a choice (JobEvent::stop_sequence, what
// Anthropic's stop_sequence reports): the one that matched first, on the last event only; none
// when max_tokens ended it.
#include "server/scheduler_fixture.h"

namespace jitllm::server {
namespace {

// The events of a finished job, in order.
std::vector<JobEvent> events_of(Job& job) {
  std::vector<JobEvent> events;
  bool done = false;
  for (int spins = 0; !done && spins < 600; ++spins)
    for (JobEvent& ev : job.take(std::chrono::milliseconds(100), done))
      events.push_back(std::move(ev));
  EXPECT_TRUE(done) << "job did not finish in 60 s";
  return events;
}

TEST(SchedulerStopSequence, NamesTheStopThatEndedTheChoice) {
  Fixture f(2);
  auto plain = greedy_job(*f.tok, "The function returns", 24);
  f.sched->submit(plain);
  const std::string solo = wait(*plain).text[0];  // no stop: the greedy text
  ASSERT_GT(solo.size(), 16u);
  // Two stops that both occur: the one met first ends the text and is the one named.
  const std::string first = solo.substr(6, 4), later = solo.substr(12, 4);
  ASSERT_LT(solo.find(first), solo.find(later));
  auto job = greedy_job(*f.tok, "The function returns", 24);
  job->stop = {later, "@@never@@", first};
  f.sched->submit(job);
  const std::vector<JobEvent> events = events_of(*job);
  ASSERT_FALSE(events.empty());
  for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_FALSE(events[i].stop_sequence);
  EXPECT_EQ(events.back().finish_reason, "stop");
  EXPECT_EQ(events.back().stop_sequence, first);

  auto free = greedy_job(*f.tok, "The function returns", 6);
  free->stop = {"@@never@@"};
  f.sched->submit(free);
  const std::vector<JobEvent> free_events = events_of(*free);
  ASSERT_FALSE(free_events.empty());
  EXPECT_EQ(free_events.back().finish_reason, "length");
  EXPECT_FALSE(free_events.back().stop_sequence);
}

}  // namespace
}  // namespace jitllm::server
