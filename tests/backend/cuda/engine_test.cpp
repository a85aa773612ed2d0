// The whole llama graph on the card (Engine with devices = "cuda") against llama.cpp's logits
// for the oracle fixtures and against the CPU engine: the same greedy tokens, logits within the
// per-format tolerance; a ragged step of 3 sessions equals their solo runs; a prompt that spans
// KV pages; and a second compiler over the same cache directory compiles nothing. Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/cuda_ops.h"
#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "runtime/session_fork.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

using jitllm::testing::oracle_path;
using jitllm::testing::read_f32;
using jitllm::testing::read_text;

// The CPU oracle test's tolerances vs llama.cpp (tests/runtime/llama_oracle_test.cpp).
float tolerance(const std::string& format) {
  if (format == "F32" || format == "F16") return 2e-3f;
  if (format == "BF16") return 6e-3f;
  return 0.03f;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::isfinite(a[i]) ? std::fabs(a[i] - b[i]) : INFINITY);
  return m;
}

int argmax(const float* row, int64_t n) { return int(std::max_element(row, row + n) - row); }

EngineOptions on(const char* devices) {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = devices;
  return o;
}

class CudaFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFixture, SameGreedyTokensAsCpuAndLogitsWithinTolerance) {
  JITLLM_REQUIRE_GPU();
  const std::string format = GetParam();
  const float tol = tolerance(format);
  const auto file = load_model_file(oracle_path("models/synth-llama." + format + ".gguf"));
  Engine cpu(file, on("cpu")), gpu_engine(file, on("cuda"));
  float worst_prompt = 0, worst_gen = 0;
  int compared = 0;
  for (const char* prompt : {"fox", "rand64", "bos"}) {
    const std::string ref = std::string("logits/synth-llama.") + format + "." + prompt;
    const auto meta = nlohmann::json::parse(read_text(oracle_path(ref + ".json")));
    const auto ids = meta["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = meta["greedy_ids"].get<std::vector<int32_t>>();
    const int64_t nv = meta["n_vocab"].get<int64_t>();
    const auto ref_logits = read_f32(oracle_path(ref + ".logits.f32"));
    const auto ref_gen = read_f32(oracle_path(ref + ".gen_logits.f32"));

    auto sc = cpu.new_session(256), sg = gpu_engine.new_session(256);
    const auto lc = cpu.prefill(*sc, ids, true), lg = gpu_engine.prefill(*sg, ids, true);
    ASSERT_EQ(lg.size(), ref_logits.size());
    worst_prompt = std::max(worst_prompt, max_abs_diff(lg.data(), ref_logits.data(), lg.size()));
    // Decode llama.cpp's greedy continuation on both; where the CPU's choice is not a near tie,
    // the card must choose the same token.
    std::vector<float> rc(lc.end() - nv, lc.end()), rg(lg.end() - nv, lg.end());
    for (size_t i = 0; i < greedy.size(); ++i) {
      std::vector<float> sorted = rc;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] > 2 * tol) {
        EXPECT_EQ(argmax(rg.data(), nv), argmax(rc.data(), nv)) << ref << " step " << i;
        ++compared;
      }
      rc = cpu.decode(*sc, greedy[i]);
      rg = gpu_engine.decode(*sg, greedy[i]);
      worst_gen = std::max(worst_gen, max_abs_diff(rg.data(), ref_gen.data() + i * size_t(nv), size_t(nv)));
    }
  }
  EXPECT_LE(worst_prompt, tol) << format;
  EXPECT_LE(worst_gen, tol) << format;
  EXPECT_GT(compared, 10) << "too few non-tied greedy steps to compare";
  std::printf("[ cuda     ] %-7s vs llama.cpp max |diff| prompt %.3g gen %.3g (tol %.3g); greedy "
              "steps compared with CPU: %d\n", format.c_str(), worst_prompt, worst_gen, tol, compared);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFixture,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0",
                                           "Q5_K_M", "IQ4_NL", "Q3_K_M", "Q2_K", "MXFP4"),
                         [](const auto& info) { return std::string(info.param); });

TEST(CudaEngine, RaggedStepEqualsSoloRuns) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  Engine e(file, on("cuda"));
  const int64_t nv = e.config().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9, 200, 31}, {1, 7}, {1, 400, 3, 8, 99, 12, 77}};
  // Solo: prompt then 4 decode steps each.
  std::vector<std::vector<float>> solo(3);
  std::vector<std::vector<int32_t>> next(3);
  for (size_t s = 0; s < 3; ++s) {
    auto ses = e.new_session(64);
    std::vector<float> l = e.prefill(*ses, prompts[s], false);
    for (int i = 0; i < 4; ++i) {
      const int32_t t = argmax(l.data(), nv);
      next[s].push_back(t);
      l = e.decode(*ses, t);
      solo[s].insert(solo[s].end(), l.begin(), l.end());
    }
  }
  // Together: one ragged prefill step of all three, then decode steps of all three.
  std::vector<std::unique_ptr<Session>> ses;
  for (int s = 0; s < 3; ++s) ses.push_back(e.new_session(64));
  std::vector<StepInput> in;
  for (size_t s = 0; s < 3; ++s) in.push_back({ses[s].get(), prompts[s], false});
  e.step(in);
  for (int i = 0; i < 4; ++i) {
    std::vector<StepInput> step;
    for (size_t s = 0; s < 3; ++s) step.push_back({ses[s].get(), std::span<const int32_t>(&next[s][size_t(i)], 1), false});
    const std::vector<float> l = e.step(step);
    for (size_t s = 0; s < 3; ++s)
      EXPECT_LE(max_abs_diff(l.data() + s * size_t(nv), solo[s].data() + size_t(i) * size_t(nv), size_t(nv)), 1e-4f)
          << "session " << s << " step " << i;
  }
}

TEST(CudaEngine, LongPromptAcrossKvPagesMatchesCpu) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q8_0.gguf"));
  EngineOptions oc = on("cpu"), og = on("cuda");
  oc.kv_page_tokens = og.kv_page_tokens = 64;  // 300 tokens span 5 pages
  Engine cpu(file, oc), gpu_engine(file, og);
  std::mt19937 rng(3);
  std::vector<int32_t> ids(300);
  for (auto& t : ids) t = int32_t(rng() % 500) + 1;
  auto sc = cpu.new_session(512), sg = gpu_engine.new_session(512);
  // Chunks of 100: later chunks attend to KV written by earlier steps.
  const auto lc = cpu.prefill(*sc, ids, true, 100), lg = gpu_engine.prefill(*sg, ids, true, 100);
  const float d = max_abs_diff(lg.data(), lc.data(), lc.size());
  EXPECT_LE(d, 0.03f);
  std::printf("[ cuda     ] 300-token prompt (5 KV pages, chunks of 100) vs CPU max |diff| %.3g\n", d);
}

TEST(CudaEngine, ForkedSessionContinuesAsItsSource) {
  // fork_session on the card (jitllmd's n > 1 choices, /v1/systemone): the card's KV lives in its
  // device copies of the host pages, so the fork must copy those. A 150-token prompt over 3 pages
  // of 64, forked whole and at 100 tokens; each fork's next logits equal, bit for bit, those of a
  // session prefilled the same way and truncated to the fork's length.
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q8_0.gguf"));
  EngineOptions o = on("cuda");
  o.kv_page_tokens = 64;
  std::mt19937 rng(4);
  std::vector<int32_t> ids(150);
  for (auto& t : ids) t = int32_t(rng() % 500) + 1;
  for (int64_t n : {int64_t(150), int64_t(100)}) {
    Engine e(file, o);  // fresh pages each case: none already holds this prompt's KV
    auto src = e.new_session(256);
    e.prefill(*src, ids, false);
    EXPECT_EQ(e.kv_pool().page_alloc_bytes(), 64u);  // every layer on the card: host stubs
    auto fork = fork_session(e, *src, n);
    auto fresh = e.new_session(256);
    e.prefill(*fresh, ids, false);  // the source's step shapes, so its KV bits
    fresh->truncate(n);
    const std::vector<float> a = e.decode(*fork, 7), b = e.decode(*fresh, 7);
    EXPECT_EQ(a, b) << "fork at " << n << " tokens";
    std::printf("[ cuda     ] fork at %ld of 150 tokens: next logits %s a fresh prefill's\n", long(n),
                a == b ? "equal" : "differ from");
  }
}

TEST(CudaEngine, GraphReplayEqualsDirectLaunches) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  auto run = [&](const char* graph) {
    std::optional<tuning::ScopedOverride> g(std::in_place, "JITLLM_CUDA_GRAPH", graph);
    Engine e(file, on("cuda"));
    g.reset();
    auto s = e.new_session(300);
    std::vector<float> l = e.prefill(*s, std::vector<int32_t>{1, 22, 333, 44}, false), all;
    // 280 steps: the session crosses a 256-token KV page while graphs are being replayed.
    for (int i = 0; i < 280; ++i) {
      l = e.decode(*s, int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const std::vector<float> direct = run("0"), graphs = run("1");
  ASSERT_EQ(direct.size(), graphs.size());
  EXPECT_EQ(max_abs_diff(graphs.data(), direct.data(), direct.size()), 0.0f);
}

// The greedy hook on the card (argmax after the head, only the ids come home) against the host
// argmax of the logits of the same steps: one session through captured and replayed decode
// steps, then ragged steps of three sessions.
TEST(CudaEngine, GreedyIdsOnTheCardEqualHostArgmax) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  Engine e(file, on("cuda"));
  const int64_t nv = e.config().n_vocab;
  auto a = e.new_session(128), b = e.new_session(128);
  const std::vector<int32_t> prompt = {1, 22, 333, 44, 5};
  e.prefill(*a, prompt, false);
  e.prefill(*b, prompt, false);
  int32_t ta = 7, tb = 7;
  for (int i = 0; i < 40; ++i) {
    const std::vector<float> l = e.decode(*a, ta);
    ta = argmax(l.data(), nv);
    tb = e.decode_greedy(*b, tb);
    ASSERT_EQ(ta, tb) << "step " << i;
  }
  std::vector<std::unique_ptr<Session>> s, u;
  for (int i = 0; i < 3; ++i) {
    s.push_back(e.new_session(64));
    u.push_back(e.new_session(64));
  }
  std::vector<int32_t> next = {3, 30, 300};
  for (int step = 0; step < 6; ++step) {
    // Step 0 feeds session 0 a two-token chunk (a ragged step), later steps one token each.
    const std::vector<int32_t> two = {next[0], 11};
    std::vector<StepInput> in, un;
    for (size_t i = 0; i < 3; ++i) {
      const std::span<const int32_t> t = step == 0 && i == 0 ? std::span<const int32_t>(two)
                                                             : std::span<const int32_t>(&next[i], 1);
      in.push_back(StepInput{s[i].get(), t, false});
      un.push_back(StepInput{u[i].get(), t, false});
    }
    const std::vector<float> l = e.step(in);
    const std::vector<int32_t> ids = e.step_greedy(un);
    ASSERT_EQ(ids.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(ids[i], argmax(l.data() + i * size_t(nv), nv)) << "step " << step << " row " << i;
      next[i] = ids[i];
    }
  }
}

// The fused launches (norm+quantize, q/k/v and gate/up in one matvec, rope+KV store, attention
// output quantized, residual add in the matvec epilogue, swiglu+quantize) against one kernel per
// op (JITLLM_CUDA_FUSE=0), through a prompt and graph-replayed decode steps. Q4_K_M mixes Q4_K
// and Q6_K matrices in one q/k/v launch.
TEST(CudaEngine, FusedLaunchesEqualOneKernelPerOp) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  auto run = [&](const char* fuse) {
    std::optional<tuning::ScopedOverride> f(std::in_place, "JITLLM_CUDA_FUSE", fuse);
    Engine e(file, on("cuda"));
    f.reset();
    auto s = e.new_session(128);
    std::vector<float> l = e.prefill(*s, std::vector<int32_t>{1, 22, 333, 44, 5}, true), all = l;
    for (int i = 0; i < 40; ++i) {
      l = e.decode(*s, int32_t(std::max_element(l.end() - e.config().n_vocab, l.end()) - (l.end() - e.config().n_vocab)));
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const std::vector<float> fused = run("1"), plain = run("0");
  ASSERT_EQ(fused.size(), plain.size());
  const float d = max_abs_diff(fused.data(), plain.data(), plain.size());
  std::printf("[ cuda     ] fused vs one kernel per op: max |diff| %.3g over %zu logits\n", d, plain.size());
  EXPECT_LE(d, 1e-5f);
}

// 20 sessions in one decode step (matvec tiles of 8, a captured graph of 20 rows) equal their
// solo runs bit for bit with JITLLM_BATCH_INVARIANT=1 (by default such a step runs the MMQ
// kernel, whose f32 sums are in another order: batched_test.cpp states that contract).
TEST(CudaEngine, TwentySessionsTogetherEqualSoloRuns) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  std::optional<tuning::ScopedOverride> bi(std::in_place, "JITLLM_BATCH_INVARIANT", "1");
  Engine e(file, on("cuda"));
  bi.reset();
  const int64_t nv = e.config().n_vocab;
  const size_t S = 20;
  const int steps = 4;
  std::vector<std::vector<int32_t>> prompts(S), next(S);
  std::vector<std::vector<float>> solo(S);
  for (size_t s = 0; s < S; ++s) {
    prompts[s] = {1, int32_t(10 + 7 * s), int32_t(100 + s)};
    if (s % 3 == 0) prompts[s].push_back(int32_t(300 + s));  // ragged positions
    auto ses = e.new_session(64);
    std::vector<float> l = e.prefill(*ses, prompts[s], false);
    for (int i = 0; i < steps; ++i) {
      const int32_t t = argmax(l.data(), nv);
      next[s].push_back(t);
      l = e.decode(*ses, t);
      solo[s].insert(solo[s].end(), l.begin(), l.end());
    }
  }
  std::vector<std::unique_ptr<Session>> ses;
  for (size_t s = 0; s < S; ++s) {
    ses.push_back(e.new_session(64));
    e.prefill(*ses.back(), prompts[s], false);
  }
  float worst = 0;
  for (int i = 0; i < steps; ++i) {
    std::vector<StepInput> step;
    for (size_t s = 0; s < S; ++s)
      step.push_back({ses[s].get(), std::span<const int32_t>(&next[s][size_t(i)], 1), false});
    const std::vector<float> l = e.step(step);
    for (size_t s = 0; s < S; ++s) {
      const float d = max_abs_diff(l.data() + s * size_t(nv), solo[s].data() + size_t(i) * size_t(nv), size_t(nv));
      worst = std::max(worst, d);
      EXPECT_EQ(d, 0.0f) << "session " << s << " step " << i;
    }
  }
  std::printf("[ cuda     ] 20 sessions together vs solo (JITLLM_BATCH_INVARIANT=1): max |diff| %.3g\n", worst);
}

TEST(CudaCache, SecondCompilerOverTheSameDirectoryCompilesNothing) {
  JITLLM_REQUIRE_GPU();
  const std::string dir = std::filesystem::temp_directory_path().string() + "/jitllm-cuda-cache-" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string sources[] = {matvec_source(WeightKind::Q4_K, 2048, 1), elementwise_source(),
                                 attention_source(64, true)};
  {
    Compiler first(*G->device, dir);
    for (const auto& s : sources) first.module(s, "test");
    EXPECT_EQ(first.stats().compiled, 3);
    for (const auto& s : sources) first.module(s, "test");
    EXPECT_EQ(first.stats().memory_hits, 3);
  }
  // Only the cubins: each was written under a temporary name of its own and renamed.
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(entry.path().extension(), ".cubin") << entry.path();
  Compiler second(*G->device, dir);
  for (const auto& s : sources) second.module(s, "test").function(&s == &sources[0] ? "matvec" : &s == &sources[1] ? "rms_norm" : "attention");
  EXPECT_EQ(second.stats().compiled, 0);
  EXPECT_EQ(second.stats().disk_hits, 3);
  // A damaged cache file is compiled afresh, not a failure.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << "garbage";
  }
  Compiler third(*G->device, dir);
  for (const auto& s : sources) third.module(s, "test");
  EXPECT_EQ(third.stats().compiled, 3);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace jitllm::cuda::test
