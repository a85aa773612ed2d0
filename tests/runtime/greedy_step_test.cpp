// The greedy hook: Ops::argmax_rows (the default host scan) picks the lowest column among equal
// maxima, as std::max_element does; Engine::step_greedy / decode_greedy return the argmax of the
// logits that step / decode return for the same inputs (one session and a ragged step of three).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

int32_t host_argmax(const float* row, int64_t n) {
  return int32_t(std::max_element(row, row + n) - row);
}

TEST(GreedyStep, DefaultArgmaxRowsTiesGoToTheLowestColumn) {
  CpuOps ops(reference_kernels());
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
  const int64_t rows = 5, cols = 1000;
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = float(small(rng));
  x[size_t(2 * cols + cols - 1)] = 9.0f;           // the maximum in the last column
  for (int64_t c = 0; c < cols; ++c) x[size_t(3 * cols + c)] = -1.5f;  // all equal: column 0
  x[size_t(4 * cols + 17)] = 5.0f;
  x[size_t(4 * cols + 900)] = 5.0f;                 // a tie between two far columns
  std::vector<int32_t> got(size_t(rows), -1);
  ops.argmax_rows(Act{x.data(), rows, cols}, got.data());
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(got[size_t(r)], host_argmax(x.data() + r * cols, cols)) << "row " << r;
  EXPECT_EQ(got[2], cols - 1);
  EXPECT_EQ(got[3], 0);
  EXPECT_EQ(got[4], 17);
}

TEST(GreedyStep, StepGreedyEqualsArgmaxOfStepLogits) {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.kv_page_tokens = 8;
  Engine engine(load_model_file(oracle_path("models/synth-llama.Q8_0.gguf")), o);
  const int64_t nv = engine.config().n_vocab;
  const std::vector<int32_t> prompt = {1, 450, 439, 293, 110, 289, 307};
  // One session: decode() then argmax vs decode_greedy() on a twin session.
  auto a = engine.new_session(), b = engine.new_session();
  engine.prefill(*a, prompt, false);
  engine.prefill(*b, prompt, false);
  int32_t ta = 5, tb = 5;
  for (int i = 0; i < 6; ++i) {
    const std::vector<float> l = engine.decode(*a, ta);
    ta = host_argmax(l.data(), nv);
    tb = engine.decode_greedy(*b, tb);
    ASSERT_EQ(ta, tb) << "step " << i;
  }
  // A ragged step of three sessions (a prompt chunk, one token, two tokens).
  auto s1 = engine.new_session(), s2 = engine.new_session(), s3 = engine.new_session();
  auto u1 = engine.new_session(), u2 = engine.new_session(), u3 = engine.new_session();
  const std::vector<int32_t> t1 = prompt, t2 = {42}, t3 = {7, 300};
  const StepInput logits_in[] = {{s1.get(), t1, false}, {s2.get(), t2, false}, {s3.get(), t3, false}};
  const StepInput greedy_in[] = {{u1.get(), t1, false}, {u2.get(), t2, false}, {u3.get(), t3, false}};
  const std::vector<float> l = engine.step(logits_in);
  const std::vector<int32_t> ids = engine.step_greedy(greedy_in);
  ASSERT_EQ(ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ids[i], host_argmax(l.data() + i * size_t(nv), nv)) << i;
  EXPECT_EQ(u3->position(), 2);  // the greedy step advanced the sessions as step() does
}

}  // namespace
}  // namespace jitllm
