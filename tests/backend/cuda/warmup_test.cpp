// "Nothing compiles after ready" (issue 6): an Engine with a card warms up in its constructor, so
// a first prompt (one long prefill step, a short tail of matvec tiles) and its decode, with logits
// and greedy-only, neither compile a kernel nor read a cubin from the disk cache; and the warmed
// engine's outputs equal those of an engine that did not warm up, bit for bit. Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/compiler.h"
#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

using jitllm::testing::oracle_path;

struct Outputs {
  std::vector<float> logits;   // last prompt row, then every decode step's logits
  std::vector<int32_t> greedy; // decode_greedy's tokens after that
};

Outputs first_prompt(Engine& e) {
  Outputs o;
  std::vector<int32_t> prompt(100);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 131 + 7) % size_t(e.config().n_vocab));
  auto s = e.new_session(256);
  o.logits = e.prefill(*s, prompt, false);
  const std::vector<int32_t> tail = {3, 5, 7, 11, 13, 17, 19};  // a step of 7 rows
  const std::vector<float> t = e.prefill(*s, tail, false);
  o.logits.insert(o.logits.end(), t.begin(), t.end());
  const int64_t nv = e.config().n_vocab;
  int32_t next = int32_t(std::max_element(t.end() - nv, t.end()) - (t.end() - nv));
  for (int i = 0; i < 20; ++i) {
    const std::vector<float> l = e.decode(*s, next);
    o.logits.insert(o.logits.end(), l.begin(), l.end());
    next = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  }
  for (int i = 0; i < 20; ++i) {
    next = e.decode_greedy(*s, next);
    o.greedy.push_back(next);
  }
  return o;
}

EngineOptions on_card() {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = "cuda";
  o.print_placement = false;
  return o;
}

TEST(CudaWarmUp, NothingCompilesAfterReadyAndOutputsEqualACold) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  EngineOptions o = on_card();
  Engine warm(file, o);
  const int64_t ready = modules_loaded_in_process();
  EXPECT_GT(ready, 0) << "the warm-up loaded no kernel";
  const Outputs w = first_prompt(warm);
  EXPECT_EQ(modules_loaded_in_process(), ready) << "kernels were loaded after the engine was ready";

  o.warm_up = false;
  Engine cold(file, o);
  const Outputs c = first_prompt(cold);
  ASSERT_EQ(w.logits.size(), c.logits.size());
  size_t differ = 0;
  for (size_t i = 0; i < w.logits.size(); ++i) differ += w.logits[i] != c.logits[i];
  EXPECT_EQ(differ, 0u) << "of " << w.logits.size() << " logits";
  EXPECT_EQ(w.greedy, c.greedy);
}

TEST(CudaWarmUp, SessionsTogetherCompileNothingAfterReady) {
  // warm_sessions = 24 (as jitllmd -parallel 24): steps of 3, 6, 13 and 24 sessions together
  // (matvec tiles of 4 and 8, the batched kernels at 2 and 3 tiles of 8), with logits and
  // greedy-only, load no module after the engine is ready.
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  EngineOptions o = on_card();
  o.warm_sessions = 24;
  Engine e(file, o);
  const int64_t ready = modules_loaded_in_process();
  for (int64_t n : {3, 6, 13, 24}) {
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(5 + 11 * i));
    std::vector<StepInput> in;
    for (int64_t i = 0; i < n; ++i) {
      sessions.push_back(e.new_session(32));
      e.prefill(*sessions.back(), std::span<const int32_t>(&ids[size_t(i)], 1), false);
    }
    for (int64_t i = 0; i < n; ++i)
      in.push_back({sessions[size_t(i)].get(), std::span<const int32_t>(&ids[size_t(i)], 1), false});
    for (int r = 0; r < 3; ++r) e.step(in);
    for (int r = 0; r < 3; ++r) e.step_greedy(in);
    EXPECT_EQ(modules_loaded_in_process(), ready) << n << " sessions together loaded kernels after ready";
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
