// The qwen3 family against transformers 5.17: a tiny random Qwen3 made with transformers' own
// Qwen3ForCausalLM (scripts/fixtures/qwen3_tiny.py; committed in tests/model/data/qwen3-tiny with
// its float32 logits and greedy ids), loaded from its HF folder (converted through the cache):
// every prompt position's logits within float16-weight rounding of transformers', and the 16
// greedy ids equal, with the reference and the generated CPU kernels, in one step and in chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(JITLLM_SOURCE_DIR) + "/tests/model/data/qwen3-tiny";

// The fixture's HF folder: its config and weights, and pydoc-llama's SentencePiece tokenizer
// (same 2048-token vocabulary; the logits do not depend on it).
std::string hf_folder() {
  const fs::path dir = fs::temp_directory_path() / "jitllm-qwen3-tiny";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(kData + "/" + f, dir / f, fs::copy_options::overwrite_existing);
  for (const char* f : {"tokenizer.model", "tokenizer_config.json"})
    fs::copy_file(testing::oracle_path(std::string("pydoc-llama/hf/") + f), dir / f,
                  fs::copy_options::overwrite_existing);
  return dir.string();
}

std::vector<float> read_f32(const std::string& path) {
  const std::string bytes = testing::read_text(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

int argmax(std::span<const float> row) {
  return int(std::max_element(row.begin(), row.end()) - row.begin());
}

class Qwen3Oracle : public ::testing::TestWithParam<const char*> {};

TEST_P(Qwen3Oracle, LogitsAndGreedyIdsMatchTransformers) {
  static const std::shared_ptr<const ModelFile> file = load_model_file(hf_folder());
  EngineOptions o;
  o.cpu_kernels = GetParam();
  Engine engine(file, o);
  const Config& c = engine.config();
  EXPECT_EQ(c.arch, "qwen3");
  EXPECT_EQ(c.rope_mode, RopeMode::Neox);
  EXPECT_EQ(c.head_dim, 48);  // key_length, not 128 / 4
  EXPECT_TRUE(engine.model().weights().tied_embeddings);
  ASSERT_FALSE(engine.model().weights().layers[1].attn_k_norm.empty());

  const nlohmann::json ref = nlohmann::json::parse(testing::read_text(kData + "/reference.json"));
  const int64_t V = c.n_vocab;
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = ref["prompts"][p]["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want = ref["prompts"][p]["greedy"].get<std::vector<int32_t>>();
    const std::vector<float> hf = read_f32(kData + "/logits." + std::to_string(p) + ".f32");
    ASSERT_EQ(hf.size(), ids.size() * size_t(V));
    for (const int64_t chunk : {int64_t(256), int64_t(5)}) {
      auto s = engine.new_session();
      const std::vector<float> logits = engine.prefill(*s, ids, true, chunk);
      ASSERT_EQ(logits.size(), hf.size());
      float diff = 0, scale = 0;
      for (size_t i = 0; i < hf.size(); ++i) {
        diff = std::max(diff, std::fabs(logits[i] - hf[i]));
        scale = std::max(scale, std::fabs(hf[i]));
      }
      // The weights are float16 in both; jitllm rounds activations to float16 (ggml's F16
      // vec_dot) and keeps K/V in float16, transformers stays in float32.
      EXPECT_LT(diff, 0.01f * scale) << "prompt " << p << " chunk " << chunk << ": max |diff| "
                                     << diff << " of logits up to " << scale;
      std::vector<int32_t> got;
      std::vector<float> last(logits.end() - V, logits.end());
      for (size_t i = 0; i < want.size(); ++i) {
        got.push_back(argmax(last));
        last = engine.decode(*s, got.back());
      }
      EXPECT_EQ(got, want) << "prompt " << p << " chunk " << chunk;
      std::printf("qwen3 %s prompt %zu (%zu ids) chunk %lld: max |diff| %.4g of %.3g\n", GetParam(),
                  p, ids.size(), (long long)chunk, diff, scale);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Qwen3Oracle, ::testing::Values("reference", "jit"));

}  // namespace
}  // namespace jitllm
