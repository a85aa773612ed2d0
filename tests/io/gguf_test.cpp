// GGUF reader on real files written by other tools (gguf-py, llama-quantize, convert_hf_to_gguf):
// the synthetic llama fixtures against fixtures.json and the oracle README's shapes, the tokenizer
// GGUFs, pydoc-llama; write_gguf round trips; split models.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "io/gguf.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

// Shapes of the synthetic llama (GGUF ne order), as listed in shared/oracle/README.md.
std::vector<int64_t> synth_shape(const std::string& name) {
  static const std::vector<std::pair<std::string, std::vector<int64_t>>> table = {
      {"token_embd.weight", {256, 512}},  {"output.weight", {256, 512}},
      {"output_norm.weight", {256}},      {"attn_norm.weight", {256}},
      {"attn_q.weight", {256, 256}},      {"attn_k.weight", {256, 128}},
      {"attn_v.weight", {256, 128}},      {"attn_output.weight", {256, 256}},
      {"ffn_norm.weight", {256}},         {"ffn_gate.weight", {256, 768}},
      {"ffn_up.weight", {256, 768}},      {"ffn_down.weight", {768, 256}},
  };
  std::string base = std::regex_replace(name, std::regex(R"(^blk\.[0-9]+\.)"), "");
  for (const auto& [n, s] : table)
    if (n == base) return s;
  ADD_FAILURE() << "unexpected tensor " << name;
  return {};
}

nlohmann::json fixtures() {
  return nlohmann::json::parse(testing::read_text(oracle_path("models/fixtures.json")));
}

TEST(Gguf, SynthFixturesMatchFixturesJson) {
  const auto fx = fixtures();
  ASSERT_EQ(fx.size(), 16u);
  for (const auto& [key, entry] : fx.items()) {
    SCOPED_TRACE(key);
    const std::string path = oracle_path(entry["file"].get<std::string>());
    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.file_bytes(), entry["bytes"].get<size_t>());
    EXPECT_EQ(f.split_count(), 1);
    EXPECT_EQ(f.metadata().architecture(), "llama");
    EXPECT_EQ(f.metadata().get_string("general.name"), "oracle-synth-llama-2L-256-v512");
    EXPECT_EQ(f.metadata().get_i64("general.file_type"), entry["general.file_type"].get<int64_t>());
    EXPECT_EQ(f.metadata().get_i64("llama.block_count"), 2);
    EXPECT_EQ(f.metadata().get_i64("llama.embedding_length"), 256);
    EXPECT_EQ(f.metadata().get_i64("llama.attention.head_count_kv"), 2);
    EXPECT_FLOAT_EQ(float(f.metadata().get_f64("llama.rope.freq_base")), 10000.0f);
    EXPECT_EQ(f.metadata().at("tokenizer.ggml.tokens").as_string_vector().size(), 512u);
    EXPECT_EQ(f.metadata().at("tokenizer.ggml.tokens").as_string_vector()[1], "<s>");
    EXPECT_EQ(f.metadata().get_i64("tokenizer.ggml.bos_token_id"), 1);
    EXPECT_TRUE(f.metadata().get_bool("tokenizer.ggml.add_bos_token"));

    const auto& types = entry["tensor_types"];
    ASSERT_EQ(f.tensors().size(), types.size());
    for (const auto& [name, type] : types.items()) {
      SCOPED_TRACE(name);
      const TensorInfo& t = f.tensor(name);
      EXPECT_EQ(t.type, quant_from_name(type.get<std::string>()).value());
      EXPECT_EQ(t.shape, synth_shape(name));
      EXPECT_EQ(t.bytes, row_bytes(t.type, t.shape[0]) * size_t(t.rows()));
      EXPECT_EQ(t.offset % f.alignment(), 0u);
    }
  }
}

TEST(Gguf, F32FixtureNormWeightsAreNearOne) {
  // README: norm vectors are 1 + 0.02 * N(0, 1); matrices are 0.02 * N(0, 1). A wrong data offset
  // would read neighbouring bytes and break these statistics.
  GgufFile f = GgufFile::open(oracle_path("models/synth-llama.F32.gguf"));
  for (const char* name : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.1.ffn_norm.weight"}) {
    const TensorInfo& t = f.tensor(name);
    std::vector<float> v(size_t(t.elements()));
    std::memcpy(v.data(), t.data, t.bytes);
    double mean = 0;
    for (float x : v) mean += x;
    mean /= double(v.size());
    EXPECT_NEAR(mean, 1.0, 0.01) << name;
  }
  const TensorInfo& q = f.tensor("blk.0.attn_q.weight");
  std::vector<float> v(size_t(q.elements()));
  std::memcpy(v.data(), q.data, q.bytes);
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  EXPECT_NEAR(std::sqrt(sq / double(v.size())), 0.02, 0.001);
}

TEST(Gguf, TokenizerGgufsOpen) {
  size_t opened = 0;
  for (const auto& e : std::filesystem::directory_iterator(oracle_path("tokenizer"))) {
    if (e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    GgufFile f = GgufFile::open(e.path().string());
    EXPECT_TRUE(f.metadata().has("tokenizer.ggml.model"));
    EXPECT_GT(f.metadata().at("tokenizer.ggml.tokens").as_array().items.size(), 1000u);
    ++opened;
  }
  EXPECT_EQ(opened, 12u);
}

TEST(Gguf, PydocLlamaGgufsOpen) {
  for (const char* fmt : {"F32", "F16", "Q8_0"}) {
    SCOPED_TRACE(fmt);
    GgufFile f = GgufFile::open(oracle_path(std::string("pydoc-llama/pydoc-llama.") + fmt + ".gguf"));
    EXPECT_EQ(f.metadata().architecture(), "llama");
    EXPECT_EQ(f.metadata().get_i64("llama.block_count"), 6);
    EXPECT_EQ(f.tensor("token_embd.weight").shape, (std::vector<int64_t>{192, 2048}));
    EXPECT_EQ(f.tensor("blk.5.attn_k.weight").shape, (std::vector<int64_t>{192, 64}));
    EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").shape, (std::vector<int64_t>{512, 192}));
    EXPECT_EQ(f.tensors().size(), 2u + 6u * 9u + 1u);
  }
}

TEST(Gguf, MissingTensorErrorNamesIt) {
  GgufFile f = GgufFile::open(oracle_path("models/synth-llama.Q8_0.gguf"));
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  try {
    f.tensor("blk.9.attn_q.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.9.attn_q.weight"), std::string::npos);
  }
}

std::string temp_dir() {
  auto d = std::filesystem::temp_directory_path() /
           ("jitllm_gguf_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(Gguf, RoundTripEveryFixture) {
  const std::string dir = temp_dir();
  const auto fx = fixtures();
  for (const auto& [key, entry] : fx.items()) {
    SCOPED_TRACE(key);
    GgufFile a = GgufFile::open(oracle_path(entry["file"].get<std::string>()));
    const std::string out = dir + "/rt.gguf";
    write_gguf(out, a.metadata(), a.tensors(), a.alignment());
    GgufFile b = GgufFile::open(out);
    EXPECT_EQ(b.version(), 3u);
    EXPECT_TRUE(a.metadata() == b.metadata());
    ASSERT_EQ(a.tensors().size(), b.tensors().size());
    for (size_t i = 0; i < a.tensors().size(); ++i) {
      const TensorInfo& x = a.tensors()[i];
      const TensorInfo& y = b.tensors()[i];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.type, y.type);
      EXPECT_EQ(x.shape, y.shape);
      ASSERT_EQ(x.bytes, y.bytes);
      EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes), 0) << x.name;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace jitllm
