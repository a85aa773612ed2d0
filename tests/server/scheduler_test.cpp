// Scheduler: sequences stepped together give what each gives alone (greedy, against a plain
// prefill/decode loop on the engine), prefix reuse changes nothing but the work done, n > 1
// choices fork one prefill, stop strings cut the text, max_tokens and cancellation end
// sequences and free their sessions.
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "server/scheduler_fixture.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {
namespace {

// Greedy continuation straight on the engine: one session, prefill (in the server's 64-token
// chunks) then decode, argmax (ties to the lowest id), no scheduler involved.
std::string solo_greedy(Engine& engine, const Tokenizer& tok, const std::string& prompt, int n) {
  auto s = engine.new_session();
  const std::vector<int32_t> ids = tok.encode(prompt, true);
  std::vector<float> logits = engine.prefill(*s, ids, false, 64);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (tok.vocab().is_eog(t)) break;
    out.push_back(t);
    logits = engine.decode(*s, t);
  }
  // The text as a continuation of the prompt (the prompt's own text dropped).
  StreamDecoder d(tok);
  for (int32_t t : ids) d.push(t);
  std::string text;
  for (int32_t t : out) text += d.push(t);
  return text + d.finish();
}

const std::vector<std::string> kPrompts = {
    "The function returns", "A list is", "To open a file", "The module provides",
    "Exceptions are raised when", "The class", "In Python, a dictionary", "Use the following"};

TEST(Scheduler, BatchedSequencesEqualTheirSoloRuns) {
  Fixture f(8);
  // References first: the engine is single-threaded (the scheduler thread owns it while jobs run).
  std::vector<std::string> solo;
  for (const auto& p : kPrompts) solo.push_back(solo_greedy(*f.engine, *f.tok, p, 24));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& p : kPrompts) {
    jobs.push_back(greedy_job(*f.tok, p, 24));
    f.sched->submit(jobs.back());
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Result r = wait(*jobs[i]);
    EXPECT_EQ(r.text[0], solo[i]) << kPrompts[i];
    EXPECT_EQ(r.finish[0], "length");
    EXPECT_EQ(r.usage.completion_tokens, 24);
  }
  EXPECT_GE(f.metrics.histogram_count("batch_size"), 24u);
}

// A prompt of more than one prefill chunk (64 tokens), so that its cold run uses the f32-tiled
// attention for the first chunk: the warm run must reproduce it exactly.
const std::string kLongPrompt =
    "The open() function returns a file object. Files should be closed with close() after use, "
    "or used in a with statement so that they are closed when the block ends. The mode argument "
    "selects reading or writing, text or binary, and the encoding argument names the codec used "
    "to decode or encode the file. The function returns";

TEST(Scheduler, PrefixReuseGivesTheSameTextWithLessWork) {
  Fixture f(2);
  const std::string longer = kLongPrompt + " a list of the lines";
  const std::string solo_a = solo_greedy(*f.engine, *f.tok, kLongPrompt, 24);
  const std::string solo_c = solo_greedy(*f.engine, *f.tok, longer, 16);
  auto a = greedy_job(*f.tok, kLongPrompt, 24);
  ASSERT_GT(a->prompt.size(), 64u);
  f.sched->submit(a);
  const Result ra = wait(*a);
  EXPECT_EQ(ra.text[0], solo_a);
  EXPECT_EQ(f.metrics.counter("prefix_cache_hits_total"), 0);
  auto b = greedy_job(*f.tok, kLongPrompt, 24);
  f.sched->submit(b);
  const Result rb = wait(*b);
  EXPECT_EQ(ra.text, rb.text);
  EXPECT_EQ(f.metrics.counter("prefix_cache_hits_total"), 1);
  // Reuse stops at the last chunk boundary before the final prompt token.
  const int64_t n = int64_t(b->prompt.size());
  EXPECT_EQ(rb.usage.cached_tokens, (n - 1) / 64 * 64);
  // A longer prompt sharing the start reuses it too and answers like a cold run.
  auto c = greedy_job(*f.tok, longer, 16);
  f.sched->submit(c);
  const Result rc = wait(*c);
  EXPECT_EQ(rc.text[0], solo_c);
  EXPECT_EQ(f.metrics.counter("prefix_cache_hits_total"), 2);
  // A short prompt shares less than one chunk: no reuse, no hit.
  auto d = greedy_job(*f.tok, "The open() function", 4);
  f.sched->submit(d);
  EXPECT_EQ(wait(*d).usage.cached_tokens, 0);
  EXPECT_EQ(f.metrics.counter("prefix_cache_hits_total"), 2);
}

TEST(Scheduler, LongAndShortPromptsTogetherEqualTheirSoloRuns) {
  // Long prompts (full chunks run alone) joining while short ones decode.
  Fixture f(4);
  const std::vector<std::string> prompts = {kLongPrompt, "A list is", kLongPrompt + " the",
                                            "To open a file"};
  std::vector<std::string> solo;
  for (const auto& p : prompts) solo.push_back(solo_greedy(*f.engine, *f.tok, p, 12));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& p : prompts) {
    jobs.push_back(greedy_job(*f.tok, p, 12));
    f.sched->submit(jobs.back());
  }
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(wait(*jobs[i]).text[0], solo[i]) << i;
}

TEST(Scheduler, ChoicesForkOnePrefill) {
  Fixture f(4);
  const std::string solo = solo_greedy(*f.engine, *f.tok, "A list is", 10);
  auto job = greedy_job(*f.tok, "A list is", 10);
  job->n = 3;
  f.sched->submit(job);
  const Result r = wait(*job);
  for (const auto& t : r.text) EXPECT_EQ(t, solo);
  EXPECT_EQ(r.usage.completion_tokens, 30);
  // Sampled choices with a seed are reproducible.
  auto s1 = greedy_job(*f.tok, "A list is", 10);
  s1->n = 2;
  s1->sampling.temperature = 1.0f;
  s1->sampling.seed = 7;
  auto s2 = std::make_shared<Job>();
  s2->prompt = s1->prompt;
  s2->max_tokens = 10;
  s2->n = 2;
  s2->sampling = s1->sampling;
  f.sched->submit(s1);
  const Result r1 = wait(*s1);
  f.sched->submit(s2);
  const Result r2 = wait(*s2);
  EXPECT_EQ(r1.text, r2.text);
}

TEST(Scheduler, StopStringCutsTheText) {
  Fixture f(2);
  const std::string solo = solo_greedy(*f.engine, *f.tok, "The function returns", 24);
  ASSERT_GT(solo.size(), 12u);
  // A stop string taken from the middle of the greedy text (it spans tokens).
  const std::string stop = solo.substr(8, 5);
  auto job = greedy_job(*f.tok, "The function returns", 24);
  job->stop = {stop};
  f.sched->submit(job);
  const Result r = wait(*job);
  EXPECT_EQ(r.text[0], solo.substr(0, solo.find(stop)));
  EXPECT_EQ(r.finish[0], "stop");
}

TEST(Scheduler, CancelledJobFreesItsSession) {
  Fixture f(2, /*cache=*/0);
  auto job = greedy_job(*f.tok, "The module provides", 400);
  f.sched->submit(job);
  bool done = false;
  std::deque<JobEvent> first;
  for (int i = 0; i < 100 && first.empty(); ++i) first = job->take(std::chrono::milliseconds(100), done);
  ASSERT_FALSE(first.empty());
  job->cancelled = true;
  for (int i = 0; i < 100 && !done; ++i) job->take(std::chrono::milliseconds(100), done);
  EXPECT_TRUE(done);
  EXPECT_EQ(f.metrics.counter("sessions_cancelled_total"), 1);
  for (int i = 0; i < 50 && f.sched->in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(f.sched->in_flight(), 0u);
  EXPECT_EQ(f.engine->kv_pool().pages_in_use(), 0u);
}

TEST(Scheduler, MaxTokensZeroAndEndOfContext) {
  Fixture f(1);
  auto zero = greedy_job(*f.tok, "A list is", 0);
  f.sched->submit(zero);
  const Result r = wait(*zero);
  EXPECT_EQ(r.text[0], "");
  EXPECT_EQ(r.finish[0], "length");
}

TEST(Scheduler, FastStepsTakeEveryRowAndPromptChunksTogether) {
  // Not deterministic (jitllmd's default): four 100-token prompts load in one step (64-token
  // chunks within the 256-token budget) instead of a step each, and every job completes.
  Fixture f(4, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), false);
  std::string long_prompt;
  for (int i = 0; i < 30; ++i) long_prompt += "the function returns a list ";
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(greedy_job(*f.tok, std::to_string(i) + " " + long_prompt, 8));
    ASSERT_GT(jobs.back()->prompt.size(), 100u);
    f.sched->submit(jobs.back());
  }
  for (auto& job : jobs) EXPECT_EQ(wait(*job).finish[0], "length");
  const std::string text = f.metrics.render();
  const auto series = [&](const std::string& name) {
    const size_t at = text.find(name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 1));
  };
  EXPECT_LT(series("jitllm_batch_size_bucket{le=\"2\"}"), series("jitllm_batch_size_count"))
      << "no step held more than two sequences";
}

TEST(Scheduler, FastStepsReuseTheWholeSharedPrefix) {
  // Not deterministic: a second request reuses every token it shares with a cached session
  // (not only whole 64-token chunks), and still completes.
  Fixture f(2, 8, {}, testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"), false);
  auto a = greedy_job(*f.tok, kLongPrompt, 8);
  f.sched->submit(a);
  wait(*a);
  auto b = greedy_job(*f.tok, kLongPrompt + " and more words at the end", 8);
  f.sched->submit(b);
  const Result rb = wait(*b);
  const int64_t shared = int64_t(a->prompt.size());
  // The shared part can end one token early (the tokenizer may merge across the join).
  EXPECT_GE(rb.usage.cached_tokens, shared - 2);
  EXPECT_NE(rb.usage.cached_tokens % 64, 0);
  EXPECT_EQ(rb.finish[0], "length");
}

}  // namespace
}  // namespace jitllm::server
