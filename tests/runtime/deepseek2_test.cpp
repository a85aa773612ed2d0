// The deepseek2 family on jitllm synth's tiny-deepseek2 (latent 256 + rope 32, 4 heads of 64 +
// 32 / 64, a dense first layer, 8 experts with a shared one, YaRN x4 with DeepSeek's mscale):
// what each layer keeps per position is the latent and its rope part (one plane, no V), the
// attention scale follows llama.cpp's mscale rule, a prompt gives the same logits in one step
// and in chunks of 7 (the latent cache read back by later chunks), decode continues it, and the
// reference and generated CPU kernels agree. transformers' own numbers are in FamilyOracle.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "convert/synth.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

const std::string& tiny_deepseek2() {
  static const std::string path = [] {
    const fs::path p = fs::temp_directory_path() / ("jlm_ds2_" + std::to_string(::getpid()) + ".gguf");
    write_synth_model(p.string(), "tiny-deepseek2", "q8_0", 7);
    return p.string();
  }();
  return path;
}

class Deepseek2 : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { fs::remove(tiny_deepseek2()); }
};

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b, float& scale) {
  float d = 0;
  scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return d;
}

TEST_F(Deepseek2, CacheKeepsTheLatentAndScalesFollowLlamaCpp) {
  EngineOptions o;
  o.kv_page_tokens = 16;
  Engine engine(load_model_file(tiny_deepseek2()), o);
  const Config& c = engine.config();
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.head_dim, 256 + 32);
  EXPECT_EQ(c.head_dim_v, 256);
  EXPECT_EQ(c.head_dim_k_mla, 96);
  EXPECT_EQ(c.head_dim_v_mla, 64);
  EXPECT_EQ(c.n_ff_shexp, 256);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 1.5f);
  // llama.cpp: the rotation's own factor cancelled (mscale = mscale_all_dim), the scores scaled
  // by get_mscale(4, 0.707)^2 / sqrt(96).
  const float m = 0.1f * 0.707f * std::log(4.0f) + 1.0f;
  EXPECT_NEAR(c.yarn_attn_factor * (1.0f + 0.1f * std::log(4.0f)), 1.0f, 1e-6f);
  EXPECT_NEAR(c.attn_scale, m * m / std::sqrt(96.0f), 1e-6f);
  // One plane of 288 per layer and position: K rows [latent, k_pe], V their first 256.
  const KvLayout kv = engine.model().kv_layout(16, QuantType::F16);
  ASSERT_EQ(kv.layers.size(), 2u);
  for (int il = 0; il < 2; ++il) {
    EXPECT_EQ(kv.layer(il).k_dim, 288);
    EXPECT_EQ(kv.layer(il).v_dim, 0);
  }
  EXPECT_EQ(kv.page_bytes(), size_t(16) * 288 * 2 * 2);
}

TEST_F(Deepseek2, ChunksDecodeAndKernelsAgree) {
  std::vector<int32_t> ids = {1};
  for (int i = 0; i < 39; ++i) ids.push_back(3 + (i * 53 + 7) % 500);
  std::vector<std::vector<float>> last_rows;
  for (const char* kernels : {"reference", "jit"}) {
    SCOPED_TRACE(kernels);
    EngineOptions o;
    o.cpu_kernels = kernels;
    o.kv_type = QuantType::F32;
    Engine engine(load_model_file(tiny_deepseek2()), o);
    const int64_t V = engine.config().n_vocab;
    auto whole = engine.new_session();
    const std::vector<float> one = engine.prefill(*whole, ids, true, 256);
    auto chunked = engine.new_session();
    const std::vector<float> seven = engine.prefill(*chunked, ids, true, 7);
    float scale = 0;
    const float d = max_abs_diff(seven, one, scale);
    EXPECT_LT(d, 1e-3f * scale) << "chunks of 7 against one step: " << d << " of " << scale;
    // Decoding the prompt's last token after the rest gives that row again.
    auto stepwise = engine.new_session();
    engine.prefill(*stepwise, std::span<const int32_t>(ids.data(), ids.size() - 1), false, 256);
    const std::vector<float> dec = engine.decode(*stepwise, ids.back());
    const std::vector<float> want(one.end() - V, one.end());
    const float dd = max_abs_diff(dec, want, scale);
    EXPECT_LT(dd, 1e-3f * scale) << "decode against the prompt's last row";
    last_rows.push_back(want);
  }
  float scale = 0;
  const float d = max_abs_diff(last_rows[1], last_rows[0], scale);
  EXPECT_GT(scale, 0.1f);
  EXPECT_LT(d, 1e-2f * scale) << "generated kernels against the reference";
}

}  // namespace
}  // namespace jitllm
