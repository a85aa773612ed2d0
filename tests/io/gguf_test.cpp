// GGUF reader on real files written by other tools (gguf-py, llama-quantize, convert_hf_to_gguf):
// the synthetic llama fixtures against fixtures.json and the oracle README's shapes, the tokenizer
// GGUFs, pydoc-llama; write_gguf round trips; split models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <functional>
#include <regex>
#include <unistd.h>

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

TEST(Gguf, RoundTripTokenizerAndPydocFilesAndRewriteIsDeterministic) {
  const std::string dir = temp_dir();
  for (const char* rel : {"tokenizer/ggml-vocab-llama-spm.gguf", "tokenizer/ggml-vocab-gpt-2.gguf",
                          "tokenizer/ggml-vocab-bert-bge.gguf", "pydoc-llama/pydoc-llama.Q8_0.gguf"}) {
    SCOPED_TRACE(rel);
    GgufFile a = GgufFile::open(oracle_path(rel));
    write_gguf(dir + "/one.gguf", a.metadata(), a.tensors(), a.alignment());
    GgufFile b = GgufFile::open(dir + "/one.gguf");
    EXPECT_TRUE(a.metadata() == b.metadata());
    ASSERT_EQ(a.tensors().size(), b.tensors().size());
    for (size_t i = 0; i < a.tensors().size(); ++i)
      EXPECT_EQ(std::memcmp(a.tensors()[i].data, b.tensors()[i].data, a.tensors()[i].bytes), 0);
    // Writing what was read back gives the same bytes again.
    write_gguf(dir + "/two.gguf", b.metadata(), b.tensors(), b.alignment());
    EXPECT_EQ(testing::read_bytes(dir + "/one.gguf"), testing::read_bytes(dir + "/two.gguf"));
  }
  std::filesystem::remove_all(dir);
}

// Writes `src` as a split set the way llama.cpp's gguf-split does: every part carries split.no
// (u16), split.count (u16) and split.tensors.count (i32); the first part also the model metadata.
std::vector<std::string> write_split(const GgufFile& src, const std::string& prefix, int parts,
                                     const std::function<void(int, Metadata&)>& edit = nullptr) {
  std::vector<std::string> paths;
  const auto& ts = src.tensors();
  const size_t per = (ts.size() + size_t(parts) - 1) / size_t(parts);
  for (int i = 0; i < parts; ++i) {
    Metadata md = i == 0 ? src.metadata() : Metadata{};
    md.set("split.no", Value::u16(uint16_t(i)));
    md.set("split.count", Value::u16(uint16_t(parts)));
    md.set("split.tensors.count", Value::i32(int32_t(ts.size())));
    if (edit) edit(i, md);
    std::vector<TensorInfo> part(ts.begin() + std::min(ts.size(), per * size_t(i)),
                                 ts.begin() + std::min(ts.size(), per * size_t(i + 1)));
    char name[64];
    std::snprintf(name, sizeof name, "-%05d-of-%05d.gguf", i + 1, parts);
    paths.push_back(prefix + name);
    write_gguf(paths.back(), md, part, src.alignment());
  }
  return paths;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Gguf, SplitModelMergesParts) {
  const std::string dir = temp_dir();
  GgufFile src = GgufFile::open(oracle_path("models/synth-llama.Q4_K_M.gguf"));
  auto paths = write_split(src, dir + "/m", 3);
  GgufFile f = GgufFile::open(paths[0]);
  EXPECT_EQ(f.split_count(), 3);
  EXPECT_EQ(f.metadata().architecture(), "llama");
  ASSERT_EQ(f.tensors().size(), src.tensors().size());
  size_t total = 0;
  for (const auto& p : paths) total += std::filesystem::file_size(p);
  EXPECT_EQ(f.file_bytes(), total);
  for (const TensorInfo& t : src.tensors()) {
    const TensorInfo& u = f.tensor(t.name);
    EXPECT_EQ(u.type, t.type);
    EXPECT_EQ(u.shape, t.shape);
    ASSERT_EQ(u.bytes, t.bytes);
    EXPECT_EQ(std::memcmp(u.data, t.data, t.bytes), 0) << t.name;
  }
  // Opening a later part points at the first.
  EXPECT_NE(error_of([&] { GgufFile::open(paths[1]); }).find("open the first part"),
            std::string::npos);
  EXPECT_NE(error_of([&] { GgufFile::open(paths[1]); }).find("m-00001-of-00003.gguf"),
            std::string::npos);
  // A missing part is named.
  std::filesystem::remove(paths[2]);
  EXPECT_NE(error_of([&] { GgufFile::open(paths[0]); }).find("part 3 of 3 is missing"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Gguf, SplitModelInconsistenciesAreRefused) {
  const std::string dir = temp_dir();
  GgufFile src = GgufFile::open(oracle_path("models/synth-llama.Q8_0.gguf"));
  // Second part claims to be part 3.
  auto paths = write_split(src, dir + "/a", 3, [](int i, Metadata& md) {
    if (i == 1) md.set("split.no", Value::u16(2));
  });
  EXPECT_NE(error_of([&] { GgufFile::open(paths[0]); }).find("split.no = 2"), std::string::npos);
  // Wrong total tensor count.
  paths = write_split(src, dir + "/b", 2, [](int i, Metadata& md) {
    if (i == 0) md.set("split.tensors.count", Value::i32(5));
  });
  EXPECT_NE(error_of([&] { GgufFile::open(paths[0]); }).find("split.tensors.count says 5"),
            std::string::npos);
  // The same tensor in two parts.
  std::vector<TensorInfo> one = {src.tensor("token_embd.weight")};
  for (int i = 0; i < 2; ++i) {
    Metadata md;
    md.set("split.no", Value::u16(uint16_t(i)));
    md.set("split.count", Value::u16(2));
    write_gguf(dir + "/c-0000" + std::to_string(i + 1) + "-of-00002.gguf", md, one);
  }
  EXPECT_NE(error_of([&] { GgufFile::open(dir + "/c-00001-of-00002.gguf"); })
                .find("tensor 'token_embd.weight' appears in more than one part"),
            std::string::npos);
  // split.count > 1 but a file name that does not say where the others are.
  Metadata md;
  md.set("split.no", Value::u16(0));
  md.set("split.count", Value::u16(2));
  write_gguf(dir + "/plain.gguf", md, one);
  EXPECT_NE(error_of([&] { GgufFile::open(dir + "/plain.gguf"); }).find("file name"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Gguf, WriteRefusesInconsistentInput) {
  const std::string dir = temp_dir();
  GgufFile src = GgufFile::open(oracle_path("models/synth-llama.Q8_0.gguf"));
  TensorInfo t = src.tensor("blk.0.attn_q.weight");
  t.bytes += 1;
  EXPECT_NE(error_of([&] { write_gguf(dir + "/w.gguf", {}, {t}); }).find("blk.0.attn_q.weight"),
            std::string::npos);
  EXPECT_NE(error_of([&] { write_gguf(dir + "/w.gguf", {}, {}, 48); }).find("power of two"),
            std::string::npos);
  Metadata md;
  md.set("general.alignment", Value::u32(64));
  EXPECT_NE(error_of([&] { write_gguf(dir + "/w.gguf", md, {}, 32); }).find("general.alignment"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/w.gguf"));
  // A non-default alignment is recorded so the reader finds the tensors again.
  write_gguf(dir + "/w.gguf", {}, {src.tensor("output_norm.weight"), src.tensor("output.weight")},
             256);
  GgufFile back = GgufFile::open(dir + "/w.gguf");
  EXPECT_EQ(back.alignment(), 256u);
  EXPECT_EQ(back.tensor("output.weight").offset % 256, 0u);
  EXPECT_EQ(std::memcmp(back.tensor("output.weight").data, src.tensor("output.weight").data,
                        src.tensor("output.weight").bytes),
            0);
  std::filesystem::remove_all(dir);
}

TEST(Gguf, SlicedTensorsAreWrittenContiguous) {
  // A stacked [4, 2, 3] F32 tensor kept as 3 slices 100 bytes apart (a .jlm's expert pages):
  // the file holds the 3 slices back to back.
  const std::string dir = temp_dir();
  std::vector<uint8_t> pages(300, 0xee);
  std::vector<float> want(24);
  for (int e = 0; e < 3; ++e)
    for (int i = 0; i < 8; ++i) {
      want[size_t(e * 8 + i)] = float(e * 10 + i);
      std::memcpy(pages.data() + e * 100 + i * 4, &want[size_t(e * 8 + i)], 4);
    }
  TensorInfo t;
  t.name = "blk.0.ffn_up_exps.weight";
  t.type = QuantType::F32;
  t.shape = {4, 2, 3};
  t.bytes = 96;
  t.data = pages.data();
  t.slice_stride = 100;
  write_gguf(dir + "/s.gguf", {}, {t});
  GgufFile back = GgufFile::open(dir + "/s.gguf");
  const TensorInfo& b = back.tensor("blk.0.ffn_up_exps.weight");
  EXPECT_EQ(b.slice_stride, 0u);
  ASSERT_EQ(b.bytes, 96u);
  EXPECT_EQ(std::memcmp(b.data, want.data(), 96), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace jitllm
