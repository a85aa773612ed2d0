// Every family against transformers 5.17: tiny random models made with transformers' own classes
// (scripts/fixtures/qwen3_tiny.py, scripts/fixtures/tiny_family.py; committed in
// tests/model/data/<family>-tiny with their float32 logits and greedy ids), loaded from their HF
// folders (converted through the cache): the recorded prompt positions' logits within
// float16-weight rounding of transformers', and the 16 greedy ids equal, with the reference and
// the generated CPU kernels, in one step and in chunks. Each fixture switches its family's quirks
// on: head_dim != n_embd / n_head, GQA, norms away from 1, biases, a sliding window shorter than
// the long prompt, soft-capping, local/global layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/family.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/greedy_check.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::family_fixture_dir;
using testing::family_hf_folder;
using testing::read_f32;

struct Case {
  const char* family;   // fixture folder tests/model/data/<family>-tiny
  const char* arch;     // general.architecture it converts to
  const char* kernels;  // EngineOptions::cpu_kernels
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.family << " (" << c.kernels << ")"; }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = std::string(info.param.family) + "_" + info.param.kernels;
  std::replace(name.begin(), name.end(), '-', '_');  // test names take no '-'
  return name;
}

class FamilyOracle : public ::testing::TestWithParam<Case> {};

TEST_P(FamilyOracle, LogitsAndGreedyIdsMatchTransformers) {
  const Case& tc = GetParam();
  const std::string data = family_fixture_dir(tc.family);
  const std::shared_ptr<const ModelFile> file = load_model_file(family_hf_folder(tc.family));
  EngineOptions o;
  o.cpu_kernels = tc.kernels;
  Engine engine(file, o);
  const Config& c = engine.config();
  EXPECT_EQ(c.arch, tc.arch);
  ASSERT_NE(c.family, nullptr);

  const nlohmann::json ref = nlohmann::json::parse(testing::read_text(data + "/reference.json"));
  const int64_t V = c.n_vocab;
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    const nlohmann::json& prompt = ref["prompts"][p];
    const std::vector<int32_t> ids = prompt["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want = prompt["greedy"].get<std::vector<int32_t>>();
    const size_t from = prompt.value("logits_from", size_t(0));  // the first row recorded
    const std::vector<float> hf = read_f32(data + "/logits." + std::to_string(p) + ".f32");
    ASSERT_EQ(hf.size(), (ids.size() - from) * size_t(V));
    for (const int64_t chunk : {int64_t(256), int64_t(5)}) {
      auto s = engine.new_session();
      const std::vector<float> logits = engine.prefill(*s, ids, true, chunk);
      ASSERT_EQ(logits.size(), ids.size() * size_t(V));
      float diff = 0, scale = 0;
      for (size_t i = 0; i < hf.size(); ++i) {
        diff = std::max(diff, std::fabs(logits[from * size_t(V) + i] - hf[i]));
        scale = std::max(scale, std::fabs(hf[i]));
      }
      // The weights are float16 in both; jitllm rounds activations to float16 (ggml's F16
      // vec_dot) and keeps K/V in float16, transformers stays in float32.
      EXPECT_LT(diff, 0.01f * scale) << tc.family << " prompt " << p << " chunk " << chunk
                                     << ": max |diff| " << diff << " of logits up to " << scale;
      const testing::GreedyCheck g = testing::check_greedy(
          std::vector<float>(logits.end() - V, logits.end()), want,
          [&](int32_t id) { return engine.decode(*s, id); }, 0.01f * scale);
      EXPECT_TRUE(g.ok) << tc.family << " prompt " << p << " chunk " << chunk << ": " << g.detail;
      if (!g.detail.empty()) std::printf("  (%s)\n", g.detail.c_str());
      std::printf("%s %s prompt %zu (%zu ids) chunk %lld: max |diff| %.4g of %.3g, %zu of %zu greedy ids\n",
                  tc.family, tc.kernels, p, ids.size(), (long long)chunk, diff, scale, g.agreed,
                  want.size());
    }
  }
}

const Case kCases[] = {
    {"qwen3", "qwen3", "reference"},   {"qwen3", "qwen3", "jit"},
    {"qwen2", "qwen2", "reference"},   {"qwen2", "qwen2", "jit"},
    {"mistral", "llama", "reference"}, {"mistral", "llama", "jit"},
    {"olmo2", "olmo2", "reference"},   {"olmo2", "olmo2", "jit"},
    {"phi3", "phi3", "reference"},     {"phi3", "phi3", "jit"},
    {"gemma", "gemma", "reference"},   {"gemma", "gemma", "jit"},
    {"gemma2", "gemma2", "reference"}, {"gemma2", "gemma2", "jit"},
    {"gemma3", "gemma3", "reference"}, {"gemma3", "gemma3", "jit"},
    {"qwen3moe", "qwen3moe", "reference"}, {"qwen3moe", "qwen3moe", "jit"},
    {"qwen2moe", "qwen2moe", "reference"}, {"qwen2moe", "qwen2moe", "jit"},
    {"olmoe", "olmoe", "reference"},       {"olmoe", "olmoe", "jit"},
    {"mixtral", "llama", "reference"},     {"mixtral", "llama", "jit"},
    {"gpt-oss", "gpt-oss", "reference"},   {"gpt-oss", "gpt-oss", "jit"},
    {"lfm2", "lfm2", "reference"},         {"lfm2", "lfm2", "jit"},
    {"deepseek2", "deepseek2", "reference"}, {"deepseek2", "deepseek2", "jit"},
    {"deepseek3", "deepseek2", "reference"}, {"deepseek3", "deepseek2", "jit"},
};
INSTANTIATE_TEST_SUITE_P(Families, FamilyOracle, ::testing::ValuesIn(kCases), case_name);

// What each fixture's family reads from its file: the quirk the fixture switches on.
TEST(FamilyOracle, ConfigsCarryTheirQuirks) {
  auto config_of = [](const char* family) {
    return Engine(load_model_file(family_hf_folder(family)), EngineOptions{}).config();
  };
  const Config qwen3 = config_of("qwen3");
  EXPECT_EQ(qwen3.rope_mode, RopeMode::Neox);
  EXPECT_EQ(qwen3.head_dim, 48);  // key_length, not 128 / 4
  const Config mistral = config_of("mistral");
  EXPECT_EQ(mistral.n_swa, 24);
  EXPECT_EQ(mistral.window_of(1), 24);
  const Config gemma2 = config_of("gemma2");
  EXPECT_EQ(gemma2.window_of(0), 24);
  EXPECT_EQ(gemma2.window_of(1), 0);
  EXPECT_FLOAT_EQ(gemma2.attn_softcap, 5.0f);
  EXPECT_FLOAT_EQ(gemma2.final_softcap, 3.0f);
  EXPECT_FLOAT_EQ(gemma2.attn_scale, 1.0f / 8.0f);  // query_pre_attn_scalar 64, head_dim 48
  EXPECT_FLOAT_EQ(gemma2.embd_scale, std::sqrt(128.0f));
  const Config gemma3 = config_of("gemma3");
  EXPECT_EQ(gemma3.window_of(0), 24);
  EXPECT_EQ(gemma3.window_of(1), 0);
  EXPECT_EQ(gemma3.window_of(2), 24);
  EXPECT_FLOAT_EQ(gemma3.rope_params_of(0).freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(gemma3.rope_params_of(1).freq_base, 1000000.0f);
}

}  // namespace
}  // namespace jitllm
