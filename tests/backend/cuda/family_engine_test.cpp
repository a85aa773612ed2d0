// Every family on the card (Engine with devices = "cuda") against transformers: the tiny random
// models of tests/model/data/<family>-tiny (scripts/fixtures/tiny_family.py), their recorded
// logits within float16-weight rounding of transformers' and within the CPU engine's tolerance of
// its own, and the 16 greedy ids equal, as a whole prompt (flash attention, the prefill path) and
// in chunks of 5 (the paged decode kernel), then decoding (graph capture and replay). Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/greedy_check.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace testing = jitllm::testing;
namespace {

using jitllm::testing::family_fixture_dir;
using jitllm::testing::family_hf_folder;
using jitllm::testing::read_f32;
using jitllm::testing::read_text;

EngineOptions on(const char* devices) {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = devices;
  return o;
}

class CudaFamily : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFamily, MatchesTransformersAndTheCpuEngine) {
  JITLLM_REQUIRE_GPU();
  const std::string family = GetParam(), data = family_fixture_dir(family);
  const auto file = load_model_file(family_hf_folder(family));
  Engine cpu(file, on("cpu")), card(file, on("cuda"));
  const int64_t V = card.config().n_vocab;
  const nlohmann::json ref = nlohmann::json::parse(read_text(data + "/reference.json"));
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    const nlohmann::json& prompt = ref["prompts"][p];
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    const auto want = prompt["greedy"].get<std::vector<int32_t>>();
    const size_t from = prompt.value("logits_from", size_t(0));
    const std::vector<float> hf = read_f32(data + "/logits." + std::to_string(p) + ".f32");
    auto cs = cpu.new_session();
    const std::vector<float> on_cpu = cpu.prefill(*cs, ids, true, 256);
    for (const int64_t chunk : {int64_t(256), int64_t(5)}) {
      auto s = card.new_session();
      const std::vector<float> logits = card.prefill(*s, ids, true, chunk);
      ASSERT_EQ(logits.size(), ids.size() * size_t(V));
      float vs_hf = 0, vs_cpu = 0, scale = 0;
      for (size_t i = 0; i < hf.size(); ++i) {
        const size_t at = from * size_t(V) + i;
        vs_hf = std::max(vs_hf, std::fabs(logits[at] - hf[i]));
        vs_cpu = std::max(vs_cpu, std::fabs(logits[at] - on_cpu[at]));
        scale = std::max(scale, std::fabs(hf[i]));
      }
      EXPECT_LT(vs_hf, 0.01f * scale) << family << " prompt " << p << " chunk " << chunk;
      // A mixture of experts carries the card's rounding through its routers' weights: 3e-3
      // (H200: olmoe's chunks of 5 at 2.1e-3 of the scale, still a third of its distance
      // from transformers).
      // gpt-oss's fixture drives its experts past the clamps at +-7 (gate/up weights x8), where
      // the two engines' f16 rounding of K/V and activations grows: 5e-3 (H100: 4.4e-3 of the
      // scale, with the card 4x closer to transformers than the CPU engine is).
      const float cpu_tol = card.config().expert_swiglu_limit > 0 ? 5e-3f
                            : card.config().n_expert > 0       ? 3e-3f
                                                               : 2e-3f;
      EXPECT_LT(vs_cpu, cpu_tol * scale) << family << " prompt " << p << " chunk " << chunk;
      const testing::GreedyCheck g = testing::check_greedy(
          std::vector<float>(logits.end() - V, logits.end()), want,
          [&](int32_t id) { return card.decode(*s, id); }, 0.01f * scale);
      EXPECT_TRUE(g.ok) << family << " prompt " << p << " chunk " << chunk << ": " << g.detail;
      if (!g.detail.empty()) std::printf("  (%s)\n", g.detail.c_str());
      std::printf("[ cuda %s prompt %zu chunk %lld: max |diff| %.4g vs transformers, %.4g vs cpu, of %.3g, %zu of %zu greedy ids\n",
                  family.c_str(), p, (long long)chunk, vs_hf, vs_cpu, scale, g.agreed, want.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFamily,
                         ::testing::Values("qwen3", "qwen2", "mistral", "olmo2", "phi3", "gemma",
                                           "gemma2", "gemma3", "qwen3moe", "qwen2moe", "olmoe",
                                           "mixtral", "gpt-oss"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string name = i.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace jitllm::cuda::test
