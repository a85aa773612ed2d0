// GGUF / .jlm / HF folder -> .jlm, checked against files made by other tools: every oracle fixture
// round-trips bit for bit; pydoc-llama's HF folder converts to exactly the tensors llama.cpp's
// convert_hf_to_gguf.py wrote (q/k row permutation included); requantizing the F32 fixture gives
// llama-quantize's bytes; MoE experts land on their own pages; an interrupted convert leaves
// nothing behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "convert/convert.h"
#include "convert/requantize.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/jlm_reader.h"
#include "io/model_file.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;
using testing::oracle_path;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("jlm_convert_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// The temporary files a writer of `out` left beside it ("<out>.tmp.XXXXXX").
std::vector<std::string> temp_files_of(const std::string& out) {
  std::vector<std::string> found;
  const fs::path p(out);
  const std::string prefix = p.filename().string() + ".tmp";
  for (const auto& e : fs::directory_iterator(p.parent_path()))
    if (e.path().filename().string().starts_with(prefix)) found.push_back(e.path().string());
  return found;
}

// Every tensor of `expected` is in `actual` with the same type, shape and bytes, and nothing else is.
void expect_same_tensors(const ModelFile& expected, const ModelFile& actual) {
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (const TensorInfo& e : expected.tensors) {
    const TensorInfo* a = actual.find(e.name);
    ASSERT_NE(a, nullptr) << e.name;
    EXPECT_EQ(quant_name(a->type), std::string(quant_name(e.type))) << e.name;
    EXPECT_EQ(a->shape, e.shape) << e.name;
    ASSERT_EQ(a->bytes, e.bytes) << e.name;
    if (a->slice_stride == 0) {
      EXPECT_EQ(0, std::memcmp(a->data, e.data, e.bytes)) << e.name << " differs";
    } else {
      const int64_t n = a->shape.back();
      const size_t slice = a->bytes / size_t(n);
      for (int64_t s = 0; s < n; ++s)
        EXPECT_EQ(0, std::memcmp(a->data + s * a->slice_stride, e.data + s * slice, slice))
            << e.name << " expert " << s;
    }
  }
}

TEST(Convert, EveryOracleFixtureRoundTripsBitExact) {
  TempDir dir;
  const auto fixtures =
      nlohmann::json::parse(testing::read_text(oracle_path("models/fixtures.json")));
  ASSERT_EQ(fixtures.size(), 16u);
  for (const auto& [key, entry] : fixtures.items()) {
    SCOPED_TRACE(key);
    const std::string gguf = oracle_path(entry["file"].get<std::string>());
    const std::string out = dir.file(key + ".jlm");
    const ConvertResult r = convert_to_jlm(gguf, out);
    EXPECT_EQ(r.requantized, 0u);
    EXPECT_TRUE(temp_files_of(out).empty());
    const ModelFile src = open_model_file(gguf);
    const ModelFile jlm = open_model_file(out);
    EXPECT_EQ(jlm.format, "jlm");
    EXPECT_EQ(jlm.metadata, src.metadata);
    expect_same_tensors(src, jlm);

    const JlmFile f = JlmFile::open(out);
    EXPECT_TRUE(f.verify().empty());
    EXPECT_EQ(f.source().get_string("source.format"), "gguf");
    EXPECT_EQ(f.source().get_u64("source.bytes"), entry["bytes"].get<uint64_t>());
    EXPECT_EQ(f.source().get_string("source.path"), fs::canonical(gguf).string());
    EXPECT_EQ(f.source().get_string("convert.type"), "keep");
    // One group each for the embedding, the 2 blocks and the head, page aligned.
    ASSERT_EQ(f.groups().size(), 4u);
    for (const JlmGroup& g : f.groups()) EXPECT_EQ(g.offset % 4096, 0u);
    fs::remove(out);
  }
}

TEST(Convert, HfPydocLlamaEqualsLlamaCppF32GgufBitwise) {
  TempDir dir;
  ConvertOptions options;
  options.source.skip_hf_tokenizer = true;  // tokenizer metadata is the tokenizer layer's (tested there)
  const std::string out = dir.file("pydoc.jlm");
  convert_to_jlm(oracle_path("pydoc-llama/hf"), out, options);
  const ModelFile gguf = open_model_file(oracle_path("pydoc-llama/pydoc-llama.F32.gguf"));
  const ModelFile jlm = open_model_file(out);
  expect_same_tensors(gguf, jlm);
  // Hyperparameters: the same keys with the same GGUF types and values as llama.cpp wrote.
  for (const auto& [key, value] : gguf.metadata.entries()) {
    if (!key.starts_with("llama.") && key != "general.architecture" &&
        key != "general.file_type" && key != "general.quantization_version")
      continue;
    const Value* mine = jlm.metadata.find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(*mine, value) << key;
  }
  for (const auto& [key, value] : jlm.metadata.entries())
    if (key.starts_with("llama.")) {
      EXPECT_TRUE(gguf.metadata.has(key)) << key << " not in llama.cpp's";
    }
  const JlmFile f = JlmFile::open(out);
  EXPECT_EQ(f.source().get_string("source.format"), "hf");
  EXPECT_EQ(f.groups().size(), 8u);  // embedding, 6 blocks, head
}

TEST(Convert, HfPydocLlamaToF16AndQ8_0EqualsLlamaCpp) {
  TempDir dir;
  for (const char* type : {"F16", "Q8_0"}) {
    SCOPED_TRACE(type);
    ConvertOptions options;
    options.source.skip_hf_tokenizer = true;
    options.target = parse_convert_target(type);
    const std::string out = dir.file(std::string(type) + ".jlm");
    convert_to_jlm(oracle_path("pydoc-llama/hf"), out, options);
    const ModelFile gguf =
        open_model_file(oracle_path(std::string("pydoc-llama/pydoc-llama.") + type + ".gguf"));
    const ModelFile jlm = open_model_file(out);
    expect_same_tensors(gguf, jlm);
    EXPECT_EQ(jlm.metadata.at("general.file_type"), gguf.metadata.at("general.file_type"));
  }
}

// Every preset llama-quantize made a fixture with, from the same F32 original: the same format
// for every tensor (its per-tensor mix) and, without an importance matrix, the same bytes.
TEST(Convert, PresetsFromTheF32FixtureEqualLlamaQuantize) {
  TempDir dir;
  const std::string f32 = oracle_path("models/synth-llama.F32.gguf");
  for (const char* type : {"F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M",
                           "Q4_1", "Q4_0", "IQ4_NL", "Q3_K_M", "Q2_K", "MXFP4_MOE"}) {
    SCOPED_TRACE(type);
    ConvertOptions options;
    options.target = parse_convert_target(type);
    const std::string out = dir.file(std::string(type) + ".jlm");
    const ConvertResult r = convert_to_jlm(f32, out, options);
    EXPECT_EQ(r.requantized, 2u + 2u * 7u);  // every matrix; the 5 norms stay F32
    const ModelFile ref =
        open_model_file(oracle_path(std::string("models/synth-llama.") + type + ".gguf"));
    const ModelFile jlm = open_model_file(out);
    ASSERT_EQ(jlm.tensors.size(), ref.tensors.size());
    for (const TensorInfo& t : jlm.tensors) {
      const TensorInfo& e = ref.get(t.name);
      ASSERT_EQ(quant_name(t.type), std::string(quant_name(e.type))) << t.name;
      ASSERT_EQ(t.bytes, e.bytes) << t.name;
      EXPECT_EQ(0, std::memcmp(t.data, e.data, t.bytes)) << t.name << " differs";
    }
    EXPECT_EQ(jlm.metadata.get_i64("general.file_type"), ref.metadata.get_i64("general.file_type"));
  }
  // --pure: every matrix in the format, the head included (llama-quantize --pure).
  ConvertOptions pure;
  pure.target = parse_convert_target("q4_0", /*pure=*/true);
  const ConvertResult r = convert_to_jlm(f32, dir.file("pure.jlm"), pure);
  for (const ConvertResult::Tensor& t : r.plan)
    EXPECT_EQ(t.to, t.name.ends_with("norm.weight") ? QuantType::F32 : QuantType::Q4_0) << t.name;
}

// A MoE-shaped GGUF written here: 2 blocks, 4 experts stacked as llama.cpp stores them.
struct MoeFixture {
  std::vector<std::vector<uint8_t>> data;
  std::vector<TensorInfo> tensors;
  Metadata metadata;
};

MoeFixture write_moe_gguf(const std::string& path) {
  MoeFixture m;
  m.metadata.set("general.architecture", Value::string("llama"));
  m.metadata.set("llama.block_count", Value::u32(2));
  m.metadata.set("llama.expert_count", Value::u32(4));
  m.metadata.set("llama.expert_used_count", Value::u32(2));
  const int64_t n_embd = 64, n_ff = 128, n_expert = 4, n_vocab = 32;
  auto add = [&](const std::string& name, QuantType type, std::vector<int64_t> shape) {
    TensorInfo t;
    t.name = name;
    t.type = type;
    t.shape = std::move(shape);
    t.bytes = row_bytes(type, t.shape[0]) * size_t(t.rows());
    m.tensors.push_back(t);
  };
  add("token_embd.weight", QuantType::F32, {n_embd, n_vocab});
  for (int b = 0; b < 2; ++b) {
    const std::string p = "blk." + std::to_string(b) + ".";
    add(p + "attn_norm.weight", QuantType::F32, {n_embd});
    add(p + "attn_q.weight", QuantType::F32, {n_embd, n_embd});
    add(p + "ffn_gate_inp.weight", QuantType::F32, {n_embd, n_expert});
    add(p + "ffn_gate_exps.weight", QuantType::F32, {n_embd, n_ff, n_expert});
    add(p + "ffn_up_exps.weight", QuantType::F32, {n_embd, n_ff, n_expert});
    add(p + "ffn_down_exps.weight", QuantType::F32, {n_ff, n_embd, n_expert});
  }
  add("output_norm.weight", QuantType::F32, {n_embd});
  add("output.weight", QuantType::F32, {n_embd, n_vocab});
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 0.02f);
  for (TensorInfo& t : m.tensors) {
    std::vector<uint8_t> bytes(t.bytes);
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (size_t i = 0; i < t.bytes / 4; ++i) f[i] = normal(rng);
    m.data.push_back(std::move(bytes));
  }
  for (size_t i = 0; i < m.tensors.size(); ++i) m.tensors[i].data = m.data[i].data();
  write_gguf(path, m.metadata, m.tensors);
  return m;
}

TEST(Convert, MoeGgufGetsOneGroupPerExpertAndReadsBackEqual) {
  TempDir dir;
  const std::string gguf = dir.file("moe.gguf");
  write_moe_gguf(gguf);
  const std::string out = dir.file("moe.jlm");
  convert_to_jlm(gguf, out);
  const JlmFile f = JlmFile::open(out);
  int experts[2] = {0, 0};
  for (const JlmGroup& g : f.groups())
    if (g.kind == JlmGroupKind::Expert) ++experts[g.block];
  EXPECT_EQ(experts[0], 4);
  EXPECT_EQ(experts[1], 4);
  for (const char* name : {"blk.1.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight"}) {
    const JlmTensor& t = *f.find(name);
    EXPECT_EQ(t.slice_count, 4u) << name;
    for (uint32_t e = 0; e < 4; ++e) {
      EXPECT_EQ(f.groups()[t.group + e].kind, JlmGroupKind::Expert);
      EXPECT_EQ(f.groups()[t.group + e].expert, int32_t(e));
    }
  }
  EXPECT_EQ(f.find("blk.1.ffn_gate_inp.weight")->slice_count, 1u);  // the router stays dense
  expect_same_tensors(open_model_file(gguf), open_model_file(out));

  // .jlm -> .jlm (gathers the expert slices back into stacked order) and requantized.
  const std::string again = dir.file("again.jlm");
  convert_to_jlm(out, again);
  expect_same_tensors(open_model_file(gguf), open_model_file(again));
  ConvertOptions q8;
  q8.target = parse_convert_target("q8_0", /*pure=*/true);
  const std::string quant = dir.file("q8.jlm");
  convert_to_jlm(out, quant, q8);
  const ModelFile q = open_model_file(quant);
  const ModelFile src = open_model_file(gguf);
  const TensorInfo& qt = q.get("blk.0.ffn_up_exps.weight");
  const TensorInfo& st = src.get("blk.0.ffn_up_exps.weight");
  ASSERT_EQ(qt.type, QuantType::Q8_0);
  EXPECT_EQ(q.get("blk.0.ffn_gate_inp.weight").type, QuantType::F32);
  const size_t slice_rows = size_t(st.shape[1]);
  std::vector<uint8_t> want(row_bytes(QuantType::Q8_0, st.shape[0]) * slice_rows);
  for (int64_t e = 0; e < 4; ++e) {
    convert_tensor_data(QuantType::F32, QuantType::Q8_0,
                        st.data + size_t(e) * slice_rows * size_t(st.shape[0]) * 4, st.shape[0],
                        int64_t(slice_rows), want);
    EXPECT_EQ(0, std::memcmp(qt.data + e * qt.slice_stride, want.data(), want.size())) << e;
  }
  EXPECT_TRUE(JlmFile::open(quant).verify().empty());
}

TEST(Convert, SplitGgufBecomesOneContainer) {
  // Parts written the way llama.cpp's gguf-split does (split.no / split.count u16,
  // split.tensors.count i32 in every part, model metadata in the first).
  TempDir dir;
  const GgufFile src = GgufFile::open(oracle_path("models/synth-llama.Q5_K_M.gguf"));
  const auto& ts = src.tensors();
  std::vector<std::string> parts;
  for (int i = 0; i < 3; ++i) {
    Metadata md = i == 0 ? src.metadata() : Metadata{};
    md.set("split.no", Value::u16(uint16_t(i)));
    md.set("split.count", Value::u16(3));
    md.set("split.tensors.count", Value::i32(int32_t(ts.size())));
    std::vector<TensorInfo> part(ts.begin() + std::min<long>(long(ts.size()), 8 * i),
                                 ts.begin() + std::min<long>(long(ts.size()), 8 * (i + 1)));
    parts.push_back(dir.file(fmt::format("m-{:05d}-of-00003.gguf", i + 1)));
    write_gguf(parts.back(), md, part);
  }
  const std::string out = dir.file("m.jlm");
  convert_to_jlm(parts[0], out);
  const ModelFile jlm = open_model_file(out);
  const ModelFile whole = open_model_file(oracle_path("models/synth-llama.Q5_K_M.gguf"));
  expect_same_tensors(whole, jlm);
  EXPECT_EQ(jlm.metadata, whole.metadata);  // split.* keys dropped: the .jlm is one file
  uint64_t bytes = 0;
  for (const auto& p : parts) bytes += fs::file_size(p);
  EXPECT_EQ(JlmFile::open(out).source().get_u64("source.bytes"), bytes);
}

TEST(Convert, InterruptedConvertLeavesNothingAtOutput) {
  TempDir dir;
  const std::string gguf = oracle_path("models/synth-llama.Q8_0.gguf");
  const std::string out = dir.file("x.jlm");
  ConvertOptions options;
  size_t seen = 0;
  options.after_tensor = [&](size_t index) {
    seen = index;
    if (index == 5) {
      EXPECT_EQ(temp_files_of(out).size(), 1u);  // the data really was being written
      throw Error("simulated crash");
    }
  };
  EXPECT_THROW(convert_to_jlm(gguf, out, options), Error);
  EXPECT_EQ(seen, 5u);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(temp_files_of(out).empty());

  std::atomic<bool> cancel{false};
  ConvertOptions cancelling;
  cancelling.cancel = &cancel;
  cancelling.progress = [&](const ConvertProgress& p) {
    if (p.index == 3) cancel = true;
  };
  try {
    convert_to_jlm(gguf, out, cancelling);
    FAIL() << "not cancelled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(temp_files_of(out).empty());

  // An existing output survives an interrupted reconversion untouched.
  convert_to_jlm(gguf, out);
  const auto before = fs::file_size(out);
  EXPECT_THROW(convert_to_jlm(gguf, out, options), Error);
  EXPECT_EQ(fs::file_size(out), before);
  EXPECT_TRUE(JlmFile::open(out).verify().empty());
}

// Two converts to one output at once (two shells, two servers filling one cache): each writes
// its own temporary file, so whichever renames last leaves a whole, valid file. With one shared
// OUT.tmp the second writer truncated the first one's data and the first then wrote its tables
// into the file the second had published.
TEST(Convert, ConcurrentConvertsToOneOutputEachLeaveAValidFile) {
  TempDir dir;
  const std::string gguf = oracle_path("models/synth-llama.Q8_0.gguf");
  const std::string out = dir.file("x.jlm");
  ConvertOptions outer;
  outer.target = parse_convert_target("f16");  // a different layout from the inner convert's
  bool inner_ran = false;
  outer.after_tensor = [&](size_t index) {
    if (index != 2) return;
    // The second writer runs start to finish while the first is half way.
    const ConvertResult r = convert_to_jlm(gguf, out);
    EXPECT_EQ(r.output, out);
    EXPECT_TRUE(JlmFile::open(out).verify().empty());
    inner_ran = true;
  };
  const ConvertResult r = convert_to_jlm(gguf, out, outer);
  EXPECT_TRUE(inner_ran);
  EXPECT_EQ(r.output, out);
  const JlmFile jlm = JlmFile::open(out);  // the first writer renamed last: its file is there
  EXPECT_TRUE(jlm.verify().empty());
  EXPECT_EQ(jlm.file_bytes(), r.output_bytes);
  EXPECT_TRUE(temp_files_of(out).empty());
}

TEST(Convert, ProgressReportsEveryTensor) {
  TempDir dir;
  std::vector<ConvertProgress> seen;
  ConvertOptions options;
  options.progress = [&](const ConvertProgress& p) { seen.push_back(p); };
  convert_to_jlm(oracle_path("models/synth-llama.Q4_K_M.gguf"), dir.file("p.jlm"), options);
  ASSERT_EQ(seen.size(), 21u);
  EXPECT_EQ(seen.back().index, 21u);
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
}

TEST(Convert, BadInputsGiveClearErrors) {
  TempDir dir;
  auto error_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of([&] { convert_to_jlm(dir.file("missing.gguf"), dir.file("o.jlm")); })
                .find("no such file"),
            std::string::npos);
  // HF folder without the tokenizer importer: the named TODO error, no output.
  const std::string e = error_of([&] { convert_to_jlm(oracle_path("pydoc-llama/hf"), dir.file("o.jlm")); });
  EXPECT_NE(e.find("HF tokenizer import not available"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir.file("o.jlm")));
  // An unsupported architecture names itself and the supported ones.
  fs::create_directories(dir.path / "hf");
  for (const auto& f : fs::directory_iterator(oracle_path("pydoc-llama/hf")))
    fs::copy_file(f.path(), dir.path / "hf" / f.path().filename());
  auto config = nlohmann::json::parse(testing::read_text((dir.path / "hf" / "config.json").string()));
  config["architectures"] = {"GPT2LMHeadModel"};
  fs::permissions(dir.path / "hf" / "config.json", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream((dir.path / "hf" / "config.json").string()) << config.dump();
  ConvertOptions options;
  options.source.skip_hf_tokenizer = true;
  const std::string arch = error_of([&] { convert_to_jlm((dir.path / "hf").string(), dir.file("o.jlm"), options); });
  EXPECT_NE(arch.find("GPT2LMHeadModel"), std::string::npos) << arch;
  EXPECT_NE(arch.find("LlamaForCausalLM"), std::string::npos) << arch;
  EXPECT_NE(error_of([] { parse_convert_target("q9_9"); }).find("--type q9_9"), std::string::npos);
  EXPECT_NE(error_of([] { parse_convert_target("Q4_K_M", true); }).find("--pure takes a plain"),
            std::string::npos);
  // Converting a file onto itself is refused before anything is written.
  const std::string self = dir.file("self.jlm");
  convert_to_jlm(oracle_path("models/synth-llama.Q4_0.gguf"), self);
  const auto size = fs::file_size(self);
  EXPECT_NE(error_of([&] { convert_to_jlm(self, self); }).find("the output is the input"),
            std::string::npos);
  EXPECT_EQ(fs::file_size(self), size);
  EXPECT_EQ(parse_convert_target("keep").type, std::nullopt);
}

}  // namespace
}  // namespace jitllm
