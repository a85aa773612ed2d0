// fork_session: a fork continues exactly like its source truncated to the same point (bitwise),
// shares nothing with it afterwards, can cut at any token (page boundaries included), and refuses
// bad sizes.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "runtime/session_fork.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

const std::vector<int32_t> kPrompt = {1, 450, 439, 293, 110, 289, 307, 122, 113, 285, 114,
                                      123, 300, 17, 42, 511, 3, 77, 260, 401};

std::unique_ptr<Engine> make_engine() {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.kv_page_tokens = 8;  // the prompt spans three pages
  return std::make_unique<Engine>(
      load_model_file(testing::oracle_path("models/synth-llama.F32.gguf")), o);
}

TEST(SessionFork, ContinuesLikeAFreshPrefill) {
  auto engine = make_engine();
  for (int64_t cut : {1, 7, 8, 9, 16, 19, 20}) {
    auto base = engine->new_session();
    engine->prefill(*base, kPrompt, false);
    auto fork = fork_session(*engine, *base, cut);
    ASSERT_EQ(fork->position(), cut);
    EXPECT_EQ(std::vector<int32_t>(fork->tokens()),
              std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + cut));
    // New tokens on the fork == the same tokens on a session that computed the same prompt the
    // same way (one chunk) and was truncated to `cut` (a prefill of only `cut` tokens would run
    // other matmul shapes, whose summation order differs in the last bits).
    auto fresh = engine->new_session();
    engine->prefill(*fresh, kPrompt, false);
    fresh->truncate(cut);
    const std::vector<int32_t> more = {5, 6, 7};
    const auto a = engine->prefill(*fork, more, true);
    const auto b = engine->prefill(*fresh, more, true);
    EXPECT_EQ(a, b) << "cut " << cut;
  }
}

TEST(SessionFork, IsIndependentOfItsSource) {
  auto engine = make_engine();
  auto base = engine->new_session();
  engine->prefill(*base, kPrompt, false);
  auto fork = fork_session(*engine, *base);
  // Writing different tokens into the fork must not change what the base computes.
  const auto before = engine->decode(*fork, 42);
  auto base2 = fork_session(*engine, *base);
  const auto ref = engine->decode(*base2, 99);
  engine->decode(*fork, 100);
  const auto again = engine->decode(*base, 99);
  EXPECT_EQ(ref, again);
  EXPECT_NE(before, again);
}

TEST(SessionFork, RefusesBadSizes) {
  auto engine = make_engine();
  auto base = engine->new_session();
  engine->prefill(*base, kPrompt, false);
  EXPECT_THROW(fork_session(*engine, *base, int64_t(kPrompt.size()) + 1), Error);
  EXPECT_THROW(fork_session(*engine, *base, -1, 4), Error);  // 20 tokens into a context of 4
  EXPECT_EQ(fork_session(*engine, *base, 0)->position(), 0);
}

}  // namespace
}  // namespace jitllm
