// Engine::warm_up leaves no trace a caller could see: the KV pool is as before (no page kept) and
// the logits of a prompt and its decode are bit for bit those of an engine that never warmed up.
// (The GPU side, "nothing compiles after ready", is tests/backend/cuda/warmup_test.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

// Prompt logits (last row) and 4 greedy decode steps' logits, concatenated.
std::vector<float> run(Engine& e) {
  const std::vector<int32_t> prompt = {1, 450, 96, 173, 17, 299, 43, 172, 75, 278};
  auto s = e.new_session(64);
  std::vector<float> all = e.prefill(*s, prompt, false);
  for (int i = 0; i < 4; ++i) {
    const int64_t nv = e.config().n_vocab;
    const float* last = all.data() + all.size() - size_t(nv);
    const int32_t next = int32_t(std::max_element(last, last + nv) - last);
    const std::vector<float> l = e.decode(*s, next);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

TEST(EngineWarmUp, LeavesThePoolEmptyAndTheOutputsUnchanged) {
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  EngineOptions o;
  o.warm_up = false;  // not even the host's (decode copies made in the first decode instead)
  Engine cold(file, o);
  o.warm_up = true;
  o.warm_sessions = 20;  // and every count of sessions together up to 20 (2, 4, 7, 8, 16, 20)
  Engine warm(file, o);
  warm.warm_up();
  EXPECT_EQ(warm.kv_pool().pages_in_use(), 0u);
  const std::vector<float> a = run(cold), b = run(warm);
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_EQ(differ, 0u) << "of " << a.size() << " logits";
  EXPECT_EQ(warm.kv_pool().pages_in_use(), 0u);
}

TEST(EngineWarmUp, SessionsTogetherStopAtACappedPoolAndLeaveNothing) {
  // 3 KV pages: the single-session shapes and 2 sessions together fit, 4 do not; the warm-up
  // stops before 4 (serving could not reach 4 either) and leaves the pool empty.
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  EngineOptions o;
  o.max_kv_pages = 3;
  o.warm_sessions = 8;
  Engine e(file, o);
  EXPECT_NO_THROW(e.warm_up());
  EXPECT_EQ(e.kv_pool().pages_in_use(), 0u);
  EXPECT_FALSE(run(e).empty());
  EXPECT_EQ(e.kv_pool().pages_in_use(), 0u);
}

// The progress a loading server shows: parts done counting up from 0 to all of them, in the
// warm-up stage, for the host's warm-up (at construction) and the card's (every part of it).
TEST(EngineWarmUp, ReportsItsProgressFromNothingToAll) {
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  std::vector<std::pair<int64_t, int64_t>> seen;
  EngineOptions o;
  o.warm_sessions = 20;
  o.progress = [&](const char* stage, int64_t done, int64_t total) {
    EXPECT_STREQ(stage, "warm-up");
    seen.emplace_back(done, total);
  };
  Engine e(file, o);  // no card: the host's warm-up
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen.front(), std::make_pair(int64_t(0), int64_t(1)));
  EXPECT_EQ(seen.back(), std::make_pair(int64_t(1), int64_t(1)));
  seen.clear();
  e.warm_up();  // the card's shapes (run here on the host): 5 single-session parts + 6 counts
  ASSERT_FALSE(seen.empty());
  const int64_t total = seen.front().second;
  EXPECT_EQ(total, 5 + 6);  // counts 2, 4, 7, 8, 16, 20
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].first, int64_t(i)) << i;
    EXPECT_EQ(seen[i].second, total) << i;
  }
  EXPECT_EQ(seen.back().first, total);
}

}  // namespace
}  // namespace jitllm
