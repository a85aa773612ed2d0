// The experts each token chose, against transformers 5.17's routers: the MoE fixtures
// (scripts/fixtures/tiny_moe.py, tests/model/data/<family>-tiny) record every layer's router
// logits for every prompt row (router.<i>.f32, [n_layer, rows, n_expert]); jitllm's are its
// "ffn_moe_logits" dumps (model/dump.h). Each row's chosen experts (route_experts over each side's
// logits) must be the same set, and the logits close, with the reference and the generated
// kernels. The fixtures were drawn so every row's k-th and (k+1)-th logits lie at least 0.03
// apart (about the largest router-logit difference between the two engines on these shapes).
// Logits and greedy ids are FamilyOracle's; the GGUF twins of the fixtures are checked here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "core/tuning.h"
#include "graph/moe.h"
#include "io/gguf.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::family_fixture_dir;
using testing::family_hf_folder;
using testing::read_f32;

struct Case {
  const char* family;
  const char* kernels;
};

class MoeOracle : public ::testing::TestWithParam<Case> {};

// The dump settings for the engines made while it lives (a Model reads them when built).
struct DumpTo {
  explicit DumpTo(const std::string& dir)
      : names("JITLLM_DUMP", "ffn_moe_logits"), to("JITLLM_DUMP_DIR", dir) {}
  tuning::ScopedOverride names, to;
};

TEST_P(MoeOracle, ChosenExpertsMatchTransformersRouters) {
  const Case& tc = GetParam();
  const std::string data = family_fixture_dir(tc.family);
  const nlohmann::json ref = nlohmann::json::parse(testing::read_text(data + "/reference.json"));
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("jitllm-moe-" + std::string(tc.family) + "-" + std::to_string(getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  const std::shared_ptr<const ModelFile> file = load_model_file(family_hf_folder(tc.family));
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = ref["prompts"][p]["ids"].get<std::vector<int32_t>>();
    EngineOptions o;
    o.cpu_kernels = tc.kernels;
    std::unique_ptr<Engine> engine;
    {
      DumpTo dump(dir);
      engine = std::make_unique<Engine>(file, o);
    }
    const Config& c = engine->config();
    ASSERT_GT(c.n_expert, 0);
    EXPECT_EQ(c.n_expert_used, ref["experts_used"].get<int>());
    auto s = engine->new_session();
    engine->prefill(*s, ids, true, 256);
    const std::vector<float> hf = read_f32(data + "/router." + std::to_string(p) + ".f32");
    const int64_t rows = int64_t(ids.size()), E = c.n_expert, k = c.n_expert_used;
    // The fixture records the layers with a router only (DeepSeek's first layer is dense).
    std::vector<int> moe_layers;
    for (int il = 0; il < c.n_layer; ++il)
      if (engine->model().weights().layers[size_t(il)].is_moe()) moe_layers.push_back(il);
    ASSERT_EQ(hf.size(), moe_layers.size() * size_t(rows * E));
    int chosen = 0;
    for (size_t m = 0; m < moe_layers.size(); ++m) {
      const int il = moe_layers[m];
      const std::vector<float> ours = read_f32(dir + "/ffn_moe_logits." + std::to_string(il) + ".f32");
      ASSERT_EQ(ours.size(), size_t(rows * E)) << "layer " << il;
      const float* theirs = hf.data() + int64_t(m) * rows * E;
      std::vector<int32_t> id_ours(size_t(rows * k)), id_theirs(size_t(rows * k));
      std::vector<float> w(size_t(rows * k));
      MoeRouting routing = c.moe_routing();  // with the layer's selection bias (DeepSeek-V3)
      const std::vector<float>& bias = engine->model().weights().layers[size_t(il)].ffn_exp_probs_b;
      if (!bias.empty()) routing.selection_bias = bias.data();
      route_experts(ours.data(), rows, routing, id_ours.data(), w.data());
      route_experts(theirs, rows, routing, id_theirs.data(), w.data());
      float diff = 0, scale = 0;
      for (int64_t i = 0; i < rows * E; ++i) {
        diff = std::max(diff, std::fabs(ours[size_t(i)] - theirs[i]));
        scale = std::max(scale, std::fabs(theirs[i]));
      }
      // As FamilyOracle's logits: float16 activations and K/V here, float32 there.
      EXPECT_LT(diff, 0.01f * scale) << tc.family << " prompt " << p << " layer " << il;
      for (int64_t r = 0; r < rows; ++r) {
        const std::set<int32_t> a(id_ours.begin() + r * k, id_ours.begin() + (r + 1) * k);
        const std::set<int32_t> b(id_theirs.begin() + r * k, id_theirs.begin() + (r + 1) * k);
        EXPECT_EQ(a, b) << tc.family << " prompt " << p << " layer " << il << " row " << r;
        chosen += a == b;
      }
    }
    std::printf("%s %s prompt %zu: %d of %lld rows x layers chose transformers' experts\n",
                tc.family, tc.kernels, p, chosen, (long long)(rows * int64_t(moe_layers.size())));
  }
  std::filesystem::remove_all(dir);
}

const Case kCases[] = {
    {"qwen3moe", "reference"}, {"qwen3moe", "jit"}, {"qwen2moe", "reference"},
    {"qwen2moe", "jit"},       {"olmoe", "reference"}, {"olmoe", "jit"},
    {"mixtral", "reference"},  {"mixtral", "jit"},  {"gpt-oss", "reference"},
    {"gpt-oss", "jit"},        {"deepseek2", "reference"}, {"deepseek2", "jit"},
    {"deepseek3", "reference"}, {"deepseek3", "jit"},
};
INSTANTIATE_TEST_SUITE_P(Families, MoeOracle, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string name = std::string(i.param.family) + "_" + i.param.kernels;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Each fixture's GGUF twin, written by our GGUF writer from the converted model (the names and
// keys llama.cpp reads), runs to the same logits, bit for bit, as the Hugging Face folder.
TEST(MoeOracle, GgufTwinsRunLikeTheirFolders) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("jitllm-moe-gguf-" + std::to_string(getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  for (const char* family :
       {"qwen3moe", "qwen2moe", "olmoe", "mixtral", "gpt-oss", "deepseek2", "deepseek3"}) {
    const std::shared_ptr<const ModelFile> hf = load_model_file(family_hf_folder(family));
    const std::string twin = dir + "/" + family + ".gguf";
    write_gguf(twin, hf->metadata, hf->tensors);
    const std::shared_ptr<const ModelFile> gguf = load_model_file(twin);
    EngineOptions o;
    o.cpu_kernels = "reference";
    Engine a(hf, o), b(gguf, o);
    EXPECT_EQ(b.config().n_expert, a.config().n_expert) << family;
    const nlohmann::json ref = nlohmann::json::parse(
        testing::read_text(family_fixture_dir(family) + "/reference.json"));
    const std::vector<int32_t> ids = ref["prompts"][0]["ids"].get<std::vector<int32_t>>();
    auto sa = a.new_session(), sb = b.new_session();
    const std::vector<float> la = a.prefill(*sa, ids, true, 256), lb = b.prefill(*sb, ids, true, 256);
    ASSERT_EQ(la.size(), lb.size());
    float diff = 0;
    for (size_t i = 0; i < la.size(); ++i) diff = std::max(diff, std::fabs(la[i] - lb[i]));
    EXPECT_EQ(diff, 0.0f) << family;
  }
  std::filesystem::remove_all(dir);
}

// What each MoE fixture's family reads from its file.
TEST(MoeOracle, ConfigsCarryTheirRouting) {
  auto config_of = [](const char* family) {
    return Engine(load_model_file(family_hf_folder(family)), EngineOptions{}).config();
  };
  const Config q3 = config_of("qwen3moe");
  EXPECT_EQ(q3.n_expert, 8);
  EXPECT_EQ(q3.n_expert_used, 3);
  EXPECT_EQ(q3.n_ff_exp, 32);
  EXPECT_TRUE(q3.expert_weights_norm);
  const Config q2 = config_of("qwen2moe");
  EXPECT_EQ(q2.n_ff_exp, 32);
  EXPECT_EQ(q2.n_ff_shexp, 48);
  EXPECT_FALSE(q2.expert_weights_norm);
  const Config olmoe = config_of("olmoe");
  EXPECT_EQ(olmoe.n_ff_exp, 32);  // its feed_forward_length
  EXPECT_FALSE(olmoe.expert_weights_norm);
  const Config mixtral = config_of("mixtral");
  EXPECT_EQ(mixtral.arch, "llama");
  EXPECT_EQ(mixtral.n_expert, 8);
  EXPECT_TRUE(mixtral.expert_weights_norm);  // llama.cpp's fixed choice for Mixtral
  const Config oss = config_of("gpt-oss");
  EXPECT_EQ(oss.arch, "gpt-oss");
  EXPECT_EQ(oss.expert_gating, MoeGating::SoftmaxChosen);
  EXPECT_FALSE(oss.expert_weights_norm);
  EXPECT_EQ(oss.expert_swiglu_limit, 7.0f);
  EXPECT_FALSE(oss.yarn_truncate);
  EXPECT_EQ(oss.n_swa, 24);
  EXPECT_TRUE(oss.is_swa(0));
  EXPECT_FALSE(oss.is_swa(1));
}

}  // namespace
}  // namespace jitllm
