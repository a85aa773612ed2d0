// safetensors and HF folders: pydoc-llama's model.safetensors (written by transformers) checked
// against the GGUF llama.cpp converted from it; dtypes decoded to values from their specs;
// sharded sets; hostile headers; truncation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "io/gguf.h"
#include "io/hf_folder.h"
#include "io/safetensors.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("non-jitllm exception: ") + e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// A safetensors file from a header text and data bytes, written by hand.
std::vector<uint8_t> st_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b(8);
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::string parse_error(const std::string& header, size_t data_bytes = 64) {
  const auto b = st_bytes(header, std::vector<uint8_t>(data_bytes, 0));
  return error_of([&] { parse_safetensors(b.data(), b.size(), "h.safetensors"); });
}

std::string temp_dir() {
  auto d = std::filesystem::temp_directory_path() /
           ("jitllm_st_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

void write_file(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()),
                                              std::streamsize(b.size()));
}
void write_file(const std::string& path, const std::string& s) {
  std::ofstream(path, std::ios::binary) << s;
}

TEST(Safetensors, PydocLlamaMatchesItsGgufConversion) {
  SafetensorsModel st = SafetensorsModel::open(oracle_path("pydoc-llama/hf/model.safetensors"));
  EXPECT_EQ(st.tensors().size(), 2u + 6u * 9u + 1u);
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.files().size(), 1u);
  // convert_hf_to_gguf copies these unpermuted (F32 -> F32), so the bytes must be identical.
  GgufFile gguf = GgufFile::open(oracle_path("pydoc-llama/pydoc-llama.F32.gguf"));
  const std::pair<const char*, const char*> same[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
      {"model.layers.3.mlp.down_proj.weight", "blk.3.ffn_down.weight"},
      {"model.layers.5.mlp.gate_proj.weight", "blk.5.ffn_gate.weight"},
      {"model.layers.2.self_attn.v_proj.weight", "blk.2.attn_v.weight"},
      {"model.layers.4.self_attn.o_proj.weight", "blk.4.attn_output.weight"},
  };
  for (const auto& [hf, gg] : same) {
    SCOPED_TRACE(hf);
    const SafetensorsTensor& a = st.tensor(hf);
    const TensorInfo& b = gguf.tensor(gg);
    EXPECT_EQ(a.dtype, SafetensorsDtype::F32);
    EXPECT_EQ(a.info.type, QuantType::F32);
    EXPECT_EQ(a.info.shape, b.shape);  // safetensors' row-major shape reversed = GGUF ne
    ASSERT_EQ(a.info.bytes, b.bytes);
    EXPECT_EQ(std::memcmp(a.info.data, b.data, b.bytes), 0);
    std::vector<float> f = st.to_f32(a);
    float g0;
    std::memcpy(&g0, b.data + 4 * 7, 4);
    EXPECT_EQ(f.at(7), g0);
  }
  EXPECT_EQ(st.tensor("model.layers.0.self_attn.k_proj.weight").info.shape,
            (std::vector<int64_t>{192, 64}));
  EXPECT_HAS(error_of([&] { st.tensor("model.nope"); }), "model.nope");
}

TEST(Safetensors, HfFolderPydocLlama) {
  HfFolder f = HfFolder::open(oracle_path("pydoc-llama/hf"));
  EXPECT_EQ(f.architecture(), "LlamaForCausalLM");
  EXPECT_EQ(f.config()["hidden_size"], 192);
  EXPECT_EQ(f.config()["num_key_value_heads"], 2);
  EXPECT_FALSE(f.tokenizer().has_value());  // the folder has only tokenizer.model
  ASSERT_TRUE(f.tokenizer_config().has_value());
  EXPECT_EQ((*f.tokenizer_config())["tokenizer_class"], "LlamaTokenizer");
  ASSERT_TRUE(f.generation_config().has_value());
  EXPECT_EQ((*f.generation_config())["eos_token_id"], 2);
  ASSERT_TRUE(f.sentencepiece_model().has_value());
  EXPECT_TRUE(std::filesystem::exists(*f.sentencepiece_model()));
  EXPECT_EQ(f.weights().tensors().size(), 57u);
}

TEST(Safetensors, HfFolderErrors) {
  const std::string dir = temp_dir();
  EXPECT_HAS(error_of([&] { HfFolder::open(dir); }), "no config.json");
  write_file(dir + "/config.json", std::string("{\"hidden_size\": 12,}"));
  EXPECT_HAS(error_of([&] { HfFolder::open(dir); }), "config.json: offset 19");
  write_file(dir + "/config.json", std::string("[1]"));
  EXPECT_HAS(error_of([&] { HfFolder::open(dir); }), "expected a JSON object");
  write_file(dir + "/config.json", std::string("{\"model_type\": \"llama\"}"));
  EXPECT_HAS(error_of([&] { HfFolder::open(dir); }), "no model.safetensors");
  write_file(dir + "/model.safetensors", st_bytes("{}", {}));
  write_file(dir + "/tokenizer.json", std::string("{\"a\": 1, \"a\": 2}"));
  EXPECT_HAS(error_of([&] { HfFolder::open(dir); }), "key 'a' appears twice");
  std::filesystem::remove(dir + "/tokenizer.json");
  HfFolder f = HfFolder::open(dir);
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_TRUE(f.weights().tensors().empty());
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, DtypesDecodeToSpecValues) {
  // F16 (IEEE binary16): 1.0 = 0x3C00, -2.0 = 0xC000, 65504 = 0x7BFF.
  // BF16: 1.0 = 0x3F80, 3.140625 = 0x4049, -0.5 = 0xBF00.
  // F8_E4M3 (OCP FP8, e4m3fn): 0x38 = 1.0, 0xB8 = -1.0, 0x7E = 448 (max), 0x01 = 2^-9 (smallest
  // subnormal), 0x08 = 2^-6 (smallest normal), 0x7F = NaN, 0x3C = 1.5.
  std::vector<uint8_t> data = {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B,   // f16 [3] at 0
                               0x80, 0x3F, 0x49, 0x40, 0x00, 0xBF,   // bf16 [3] at 6
                               0x38, 0xB8, 0x7E, 0x01, 0x08, 0x7F, 0x3C, 0x00};  // f8 [2, 4]
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[6,12]},)"
      R"("e":{"dtype":"F8_E4M3","shape":[2,4],"data_offsets":[12,20]}})";
  const std::string dir = temp_dir();
  write_file(dir + "/model.safetensors", st_bytes(header, data));
  SafetensorsModel m = SafetensorsModel::open(dir);
  EXPECT_EQ(m.to_f32(m.tensor("h")), (std::vector<float>{1.0f, -2.0f, 65504.0f}));
  EXPECT_EQ(m.tensor("h").info.type, QuantType::F16);
  EXPECT_EQ(m.to_f32(m.tensor("b")), (std::vector<float>{1.0f, 3.140625f, -0.5f}));
  EXPECT_EQ(m.tensor("b").info.type, QuantType::BF16);
  const SafetensorsTensor& e = m.tensor("e");
  EXPECT_EQ(e.dtype, SafetensorsDtype::F8_E4M3);
  EXPECT_EQ(e.info.shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(e.info.bytes, 8u);
  const std::vector<float> f8 = m.to_f32(e);
  EXPECT_EQ(f8[0], 1.0f);
  EXPECT_EQ(f8[1], -1.0f);
  EXPECT_EQ(f8[2], 448.0f);
  EXPECT_EQ(f8[3], std::ldexp(1.0f, -9));
  EXPECT_EQ(f8[4], std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(f8[5]));
  EXPECT_EQ(f8[6], 1.5f);
  EXPECT_EQ(f8[7], 0.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(f8_e4m3_to_f32(0x80)));
  EXPECT_EQ(f8_e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(f8_e4m3_to_f32(0x07), std::ldexp(7.0f, -9));  // largest subnormal
  std::filesystem::remove_all(dir);
}

// Splits pydoc-llama's tensors over two shard files with an index, the way transformers does.
void write_shards(const SafetensorsModel& src, const std::string& dir,
                  const std::function<void(nlohmann::json&)>& edit_index = nullptr) {
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < 2; ++s) {
    const std::string shard = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
    nlohmann::json header = nlohmann::json::object();
    std::vector<uint8_t> data;
    for (size_t i = size_t(s); i < src.tensors().size(); i += 2) {
      const SafetensorsTensor& t = src.tensors()[i];
      std::vector<int64_t> shape(t.info.shape.rbegin(), t.info.shape.rend());
      header[t.info.name] = {{"dtype", "F32"}, {"shape", shape},
                             {"data_offsets", {data.size(), data.size() + t.info.bytes}}};
      data.insert(data.end(), t.info.data, t.info.data + t.info.bytes);
      index["weight_map"][t.info.name] = shard;
    }
    write_file(dir + "/" + shard, st_bytes(header.dump(), data));
  }
  if (edit_index) edit_index(index);
  write_file(dir + "/model.safetensors.index.json", index.dump());
}

TEST(Safetensors, ShardedSet) {
  SafetensorsModel src = SafetensorsModel::open(oracle_path("pydoc-llama/hf/model.safetensors"));
  const std::string dir = temp_dir();
  write_shards(src, dir);
  SafetensorsModel m = SafetensorsModel::open(dir);
  EXPECT_EQ(m.files().size(), 2u);
  EXPECT_EQ(m.metadata().at("total_size"), "0");
  ASSERT_EQ(m.tensors().size(), src.tensors().size());
  for (const auto& t : src.tensors()) {
    const SafetensorsTensor& u = m.tensor(t.info.name);
    EXPECT_EQ(u.info.shape, t.info.shape);
    ASSERT_EQ(u.info.bytes, t.info.bytes);
    EXPECT_EQ(std::memcmp(u.info.data, t.info.data, t.info.bytes), 0) << t.info.name;
  }
  // Opening the index file itself works too.
  EXPECT_EQ(SafetensorsModel::open(dir + "/model.safetensors.index.json").tensors().size(),
            src.tensors().size());

  const std::string embed = "model.embed_tokens.weight";
  write_shards(src, dir, [&](nlohmann::json& ix) {
    const std::string first = "model-00001-of-00002.safetensors";
    ix["weight_map"][embed] = ix["weight_map"][embed] == first ? "model-00002-of-00002.safetensors"
                                                               : first;
  });
  EXPECT_HAS(error_of([&] { SafetensorsModel::open(dir); }), "the index's weight_map says");
  write_shards(src, dir, [&](nlohmann::json& ix) { ix["weight_map"]["extra.weight"] =
                                                       "model-00001-of-00002.safetensors"; });
  EXPECT_HAS(error_of([&] { SafetensorsModel::open(dir); }),
             "tensor 'extra.weight' is listed in the weight_map but missing");
  write_shards(src, dir, [&](nlohmann::json& ix) { ix["weight_map"][embed] = "../x.safetensors"; });
  EXPECT_HAS(error_of([&] { SafetensorsModel::open(dir); }), "not a file name in the same folder");
  write_shards(src, dir, [&](nlohmann::json& ix) {
    ix["weight_map"][embed] = "model-00003-of-00002.safetensors";
  });
  EXPECT_HAS(error_of([&] { SafetensorsModel::open(dir); }), "is missing");
  write_shards(src, dir, [&](nlohmann::json& ix) { ix.erase("weight_map"); });
  EXPECT_HAS(error_of([&] { SafetensorsModel::open(dir); }), "'weight_map' missing");
  // The same tensor in both shards.
  write_shards(src, dir);
  write_file(dir + "/model-00002-of-00002.safetensors",
             st_bytes(R"({"model.norm.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                      std::vector<uint8_t>(4)));
  EXPECT_HAS(error_of([&] { SafetensorsModel::open(dir); }), "more than one shard");
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsHostile, HeaderLength) {
  std::vector<uint8_t> b = {1, 2, 3};
  EXPECT_HAS(error_of([&] { parse_safetensors(b.data(), b.size(), "h.safetensors"); }),
             "h.safetensors: offset 0: header length: file of 3 bytes is too short");
  b = st_bytes("{}", {});
  const uint64_t huge = uint64_t(1) << 60;
  std::memcpy(b.data(), &huge, 8);
  EXPECT_HAS(error_of([&] { parse_safetensors(b.data(), b.size(), "h.safetensors"); }),
             "header length 1152921504606846976 runs past the end of the file (size 10)");
  b = st_bytes("{}", {});
  EXPECT_TRUE(parse_safetensors(b.data(), b.size(), "h").tensors.empty());
}

TEST(SafetensorsHostile, HeaderJson) {
  EXPECT_HAS(parse_error(R"({"a":{"dtype":"F32",)"), "offset 28: header: invalid JSON");
  EXPECT_HAS(parse_error("[]"), "expected a JSON object, got array");
  EXPECT_HAS(parse_error(std::string(100, '[') + std::string(100, ']')),
             "nested deeper than");
  EXPECT_HAS(parse_error(std::string(1000000, '[')), "nested deeper than");
  // Brackets inside strings do not count as nesting.
  EXPECT_HAS(parse_error(R"({"__metadata__":{"k":")" + std::string(100, '[') + R"("}})"), "(no error)");
  const std::string a = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  EXPECT_HAS(parse_error("{" + a + "," + a + "}"), "key 'a' appears twice");
  EXPECT_HAS(parse_error(R"({"__metadata__":[1]})"), "'__metadata__' must be an object");
  EXPECT_HAS(parse_error("{\"\xff\":1}"), "invalid JSON");  // not UTF-8
}

TEST(SafetensorsHostile, TensorEntries) {
  auto entry = [](const std::string& body) { return "{\"w\":" + body + "}"; };
  EXPECT_HAS(parse_error(entry("3")), "tensor 'w': expected an object, got number");
  EXPECT_HAS(parse_error(entry(R"({"shape":[1],"data_offsets":[0,4]})")), "'dtype' missing");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"I64","shape":[1],"data_offsets":[0,8]})")),
             "tensor 'w': dtype I64 is not supported (supported: F32, F16, BF16, F8_E4M3, U8)");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","data_offsets":[0,4]})")), "'shape' missing");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]})")),
             "shape has 5 dimensions (at most 4)");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})")),
             "shape[0] is negative (-1)");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})")),
             "shape[0] must be a non-negative integer, got 1.5");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]})")),
             "overflows the element count");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})")),
             "overflows the element count");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1099511627776,1099511627776,0],"data_offsets":[0,0]})")),
             "overflows the element count");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]})")),
             "overflows the byte size");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})")),
             "'data_offsets' must be an array [begin, end]");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})")),
             "begin is after end");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[64,68]})")),
             "data_offsets [64, 68] run past the end of the data (64 bytes)");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})")),
             "data_offsets [0, 4] hold 4 bytes, but F32 [2] needs 8");
  EXPECT_HAS(parse_error(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,-4]})")),
             "data_offsets[1] is negative");
  EXPECT_HAS(parse_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"),
             "tensor 'b': data_offsets [8, 16] overlap tensor 'a' at [0, 16]");
  // Empty tensors and a scalar are fine.
  EXPECT_HAS(parse_error(R"({"a":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                         R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})"),
             "(no error)");
}

TEST(SafetensorsHostile, TruncatedRealFileAtManyOffsets) {
  const auto bytes = testing::read_bytes(oracle_path("pydoc-llama/hf/model.safetensors"));
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  size_t checked = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += cut < 512 ? 1 : cut < 8 + header_len ? 5 : 16411) {
    const std::string e = error_of([&] { parse_safetensors(bytes.data(), cut, "cut.safetensors"); });
    EXPECT_EQ(e.rfind("cut.safetensors: ", 0), 0u) << e;
    ++checked;
  }
  EXPECT_GT(checked, 1500u);
  EXPECT_EQ(parse_safetensors(bytes.data(), bytes.size(), "full").tensors.size(), 57u);
}

}  // namespace
}  // namespace jitllm
