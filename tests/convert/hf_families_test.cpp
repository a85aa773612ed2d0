// The HF families beyond llama (qwen2, gemma, gemma2, gemma3, phi3, olmo2) and Mistral's sliding
// window, converted from the tiny random checkpoints transformers 5.17 wrote
// (tests/model/data/<family>-tiny, f16; pydoc-llama's tokenizer copied in) and read back: the
// architecture, every hyperparameter key against config.json, the tensor names and shapes, the
// transforms (Gemma's 1 + w norms in F32, phi3's fused projections kept fused, LongRoPE's
// generated factors), and the configs the converter must refuse, each error naming its field.
// This checks what the converter writes, through the .jlm reader; whether the model layer runs
// it is tested where models are loaded (tests/model, tests/runtime).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/convert.h"
#include "convert/hf_folder_writer.h"
#include "core/error.h"
#include "io/hf_folder.h"
#include "io/model_file.h"
#include "io/safetensors.h"
#include "testutil/shared_data.h"
#include "tokenizer/hf_tokenizer.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HfFolderWriter;

const std::string kData = std::string(JITLLM_SOURCE_DIR) + "/tests/model/data/";
constexpr size_t npos = std::string::npos;

void import_tokenizer(const HfFolder& folder, Metadata& m) {
  const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
  for (const auto& [key, value] : tokenizer.entries()) m.set(key, value);
}

ConvertOptions with_tokenizer() {
  ConvertOptions o;
  o.source.hf_tokenizer = import_tokenizer;
  return o;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A temporary copy of tests/model/data/<family>-tiny with pydoc-llama's tokenizer, its
// config.json changed by `edit`.
class Fixture {
 public:
  explicit Fixture(const std::string& family, const std::function<void(json&)>& edit = {}) {
    static int count = 0;
    dir_ = fs::temp_directory_path() /
           ("jlm_family_" + std::to_string(::getpid()) + "_" + family + std::to_string(count++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string src = kData + family + "-tiny/";
    fs::copy_file(src + "model.safetensors", dir_ / "model.safetensors");
    for (const char* f : {"tokenizer.model", "tokenizer_config.json"})
      fs::copy_file(testing::oracle_path(std::string("pydoc-llama/hf/") + f), dir_ / f);
    config_ = json::parse(testing::read_text(src + "config.json"));
    if (edit) edit(config_);
    std::ofstream(dir_ / "config.json") << config_.dump(2);
  }
  ~Fixture() { fs::remove_all(dir_); }
  const json& config() const { return config_; }
  std::string dir() const { return dir_.string(); }
  std::string out() const { return (dir_ / "out.jlm").string(); }

  ModelFile convert() const {
    convert_to_jlm(dir(), out(), with_tokenizer());
    return open_model_file(out());
  }
  std::string error() const {
    const std::string e = error_of([&] { convert_to_jlm(dir(), out(), with_tokenizer()); });
    EXPECT_FALSE(fs::exists(out())) << e;
    return e;
  }

 private:
  fs::path dir_;
  json config_;
};

int64_t i64(const json& c, const char* key) { return c.at(key).get<int64_t>(); }
double f32(double v) { return double(float(v)); }  // what an F32 key holds

// The keys every family writes alike, against config.json.
void expect_shape_keys(const Metadata& m, const std::string& arch, const json& c) {
  EXPECT_EQ(m.get_string("general.architecture"), arch);
  const std::string a = arch + ".";
  EXPECT_EQ(m.get_i64(a + "block_count"), i64(c, "num_hidden_layers"));
  EXPECT_EQ(m.get_i64(a + "context_length"), i64(c, "max_position_embeddings"));
  EXPECT_EQ(m.get_i64(a + "embedding_length"), i64(c, "hidden_size"));
  EXPECT_EQ(m.get_i64(a + "feed_forward_length"), i64(c, "intermediate_size"));
  EXPECT_EQ(m.get_i64(a + "attention.head_count"), i64(c, "num_attention_heads"));
  EXPECT_EQ(m.get_i64(a + "attention.head_count_kv"), i64(c, "num_key_value_heads"));
  EXPECT_EQ(m.get_f64(a + "attention.layer_norm_rms_epsilon"), f32(c.at("rms_norm_eps")));
  EXPECT_EQ(m.get_i64(a + "vocab_size"), i64(c, "vocab_size"));
  EXPECT_EQ(m.get_i64("general.file_type"), 1);  // f16 checkpoint
  // pydoc-llama's SentencePiece vocab, one piece per embedding row.
  EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(m.at("tokenizer.ggml.tokens").as_array().items.size(), size_t(i64(c, "vocab_size")));
}

std::vector<bool> bools(const Metadata& m, const std::string& key) {
  std::vector<bool> out;
  const Value& v = m.at(key);
  EXPECT_EQ(v.as_array().element_type, ValueType::Bool) << key;
  for (const Value& b : v.as_array().items) out.push_back(b.as_bool());
  return out;
}

// Every tensor of the checkpoint is in the output under its GGUF name and nothing else is but
// `extra`. `names` maps HF names (per layer: what follows "model.layers.N.") to GGUF names (per
// layer: what follows "blk.N."); "" drops the tensor. Shapes are the checkpoint's; matrices keep
// their f16 bytes (but `permuted`), 1-D tensors become F32 with the same values, or 1 + the value
// for every "*norm.weight" when `plus_one_norms`.
void expect_tensors(const ModelFile& m, const std::string& dir,
                    const std::map<std::string, std::string>& names,
                    const std::set<std::string>& extra = {}, bool plus_one_norms = false,
                    const std::set<std::string>& permuted = {}) {
  const SafetensorsModel src = SafetensorsModel::open(dir);
  std::set<std::string> want = extra;
  for (const SafetensorsTensor& t : src.tensors()) {
    const std::string& hf = t.info.name;
    std::string gguf;
    const std::string layers = "model.layers.";
    if (hf.starts_with(layers)) {
      const size_t dot = hf.find('.', layers.size());
      const std::string rest = hf.substr(dot + 1);
      ASSERT_TRUE(names.count(rest)) << hf;
      if (names.at(rest).empty()) continue;
      gguf = "blk." + hf.substr(layers.size(), dot - layers.size()) + "." + names.at(rest);
    } else {
      ASSERT_TRUE(names.count(hf)) << hf;
      gguf = names.at(hf);
      if (gguf.empty()) continue;
    }
    want.insert(gguf);
    const TensorInfo* out = m.find(gguf);
    ASSERT_NE(out, nullptr) << gguf << " (from " << hf << ")";
    EXPECT_EQ(out->shape, t.info.shape) << gguf;
    if (t.info.shape.size() == 1) {
      ASSERT_EQ(out->type, QuantType::F32) << gguf;
      const std::vector<float> v = src.to_f32(t);
      const bool plus_one = plus_one_norms && hf.ends_with("norm.weight");
      for (size_t i = 0; i < v.size(); ++i) {
        float got;
        std::memcpy(&got, out->data + 4 * i, 4);
        ASSERT_EQ(got, plus_one ? v[i] + 1.0f : v[i]) << gguf << "[" << i << "]";
      }
    } else {
      EXPECT_EQ(out->type, QuantType::F16) << gguf;
      if (!permuted.count(gguf.substr(gguf.find('.', 4) + 1))) {
        EXPECT_EQ(0, std::memcmp(out->data, t.info.data, t.info.bytes)) << gguf;
      }
    }
  }
  std::set<std::string> got;
  for (const TensorInfo& t : m.tensors) got.insert(t.name);
  EXPECT_EQ(got, want);
}

const std::map<std::string, std::string> kModelWide = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
std::map<std::string, std::string> names_with(std::map<std::string, std::string> layer) {
  layer.insert(kModelWide.begin(), kModelWide.end());
  return layer;
}
const std::map<std::string, std::string> kProjections = {
    {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},  {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
std::map<std::string, std::string> projections_and(std::map<std::string, std::string> extra) {
  extra.insert(kProjections.begin(), kProjections.end());
  return names_with(extra);
}

// ---- qwen2 -------------------------------------------------------------------------------------

TEST(HfFamilies, Qwen2KeysBiasesAndNames) {
  const Fixture f("qwen2");
  const ModelFile m = f.convert();
  const json& c = f.config();
  expect_shape_keys(m.metadata, "qwen2", c);
  EXPECT_EQ(m.metadata.get_f64("qwen2.rope.freq_base"), 1e6);
  EXPECT_EQ(m.metadata.get_i64("qwen2.rope.dimension_count"), 32);  // 128 / 4 heads
  EXPECT_FALSE(m.metadata.has("qwen2.attention.key_length"));       // no head_dim in config.json
  EXPECT_FALSE(m.metadata.has("qwen2.rope.scaling.type"));
  expect_tensors(m, f.dir(),
                 projections_and({{"input_layernorm.weight", "attn_norm.weight"},
                                  {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                  {"self_attn.q_proj.bias", "attn_q.bias"},
                                  {"self_attn.k_proj.bias", "attn_k.bias"},
                                  {"self_attn.v_proj.bias", "attn_v.bias"}}));
  EXPECT_EQ(m.find("output.weight"), nullptr);  // tied
  EXPECT_EQ(m.get("blk.1.attn_q.bias").shape, std::vector<int64_t>{128});
  EXPECT_EQ(m.get("blk.1.attn_k.bias").shape, std::vector<int64_t>{64});  // 2 kv heads x 32
  EXPECT_EQ(m.get("blk.1.attn_v.bias").type, QuantType::F32);
}

TEST(HfFamilies, Qwen2RefusesSlidingWindowLayers) {
  const Fixture f("qwen2", [](json& c) {
    c["use_sliding_window"] = true;
    c["sliding_window"] = 16;
  });
  const std::string e = f.error();
  EXPECT_NE(e.find("use_sliding_window"), npos) << e;
}

// ---- mistral -----------------------------------------------------------------------------------

TEST(HfFamilies, MistralSlidingWindowAndHeadDim) {
  const Fixture f("mistral");
  const ModelFile m = f.convert();
  expect_shape_keys(m.metadata, "llama", f.config());
  EXPECT_EQ(m.metadata.get_i64("llama.attention.sliding_window"), 24);
  EXPECT_EQ(m.metadata.get_i64("llama.attention.key_length"), 48);  // head_dim, not 128 / 4
  EXPECT_EQ(m.metadata.get_i64("llama.attention.value_length"), 48);
  EXPECT_EQ(m.metadata.get_i64("llama.rope.dimension_count"), 48);
  expect_tensors(m, f.dir(),
                 projections_and({{"input_layernorm.weight", "attn_norm.weight"},
                                  {"post_attention_layernorm.weight", "ffn_norm.weight"}}),
                 {}, false, {"attn_q.weight", "attn_k.weight"});  // llama's rope row order
  EXPECT_NE(m.find("output.weight"), nullptr);

  const Fixture none("mistral", [](json& c) { c["sliding_window"] = nullptr; });
  EXPECT_FALSE(none.convert().metadata.has("llama.attention.sliding_window"));
  const Fixture zero("mistral", [](json& c) { c["sliding_window"] = 0; });
  const std::string e = zero.error();
  EXPECT_NE(e.find("'sliding_window' is 0"), npos) << e;
}

// ---- gemma -------------------------------------------------------------------------------------

TEST(HfFamilies, GemmaNormsPlusOneTiedAndTokenizer) {
  const Fixture f("gemma");
  const ModelFile m = f.convert();
  expect_shape_keys(m.metadata, "gemma", f.config());
  EXPECT_EQ(m.metadata.get_i64("gemma.attention.key_length"), 48);
  EXPECT_EQ(m.metadata.get_i64("gemma.attention.value_length"), 48);
  EXPECT_EQ(m.metadata.get_f64("gemma.rope.freq_base"), 10000.0);
  expect_tensors(m, f.dir(),
                 projections_and({{"input_layernorm.weight", "attn_norm.weight"},
                                  {"post_attention_layernorm.weight", "ffn_norm.weight"}}),
                 {}, true);
  EXPECT_EQ(m.find("output.weight"), nullptr);
  // llama.cpp's Gemma vocab: no space prefix; <end_of_turn> is 107.
  EXPECT_FALSE(m.metadata.get_bool("tokenizer.ggml.add_space_prefix"));
  EXPECT_EQ(m.metadata.get_i64("tokenizer.ggml.eot_token_id"), 107);
}

TEST(HfFamilies, GemmaActivationMustBeTanhGelu) {
  // Gemma 1's configs say "gelu" (google/gemma-7b) for the tanh approximation; llama.cpp's gemma
  // graph runs that whatever the config says.
  for (const char* act : {"gelu", "gelu_tanh", "gelu_pytorch_tanh"}) {
    const Fixture f("gemma", [&](json& c) {
      c["hidden_activation"] = act;
      c["hidden_act"] = act;
    });
    EXPECT_NO_THROW(f.convert()) << act;
  }
  const Fixture legacy("gemma", [](json& c) {
    c.erase("hidden_activation");
    c["hidden_act"] = "gelu";
  });
  EXPECT_NO_THROW(legacy.convert());
  const struct {
    const char* key;
    const char* value;
  } bad[] = {{"hidden_activation", "relu"}, {"hidden_act", "silu"}, {"hidden_act", "gelu_new"}};
  for (const auto& b : bad) {
    const Fixture f("gemma", [&](json& c) { c[b.key] = b.value; });
    const std::string e = f.error();
    EXPECT_NE(e.find(std::string(b.key) + " '" + b.value + "' is not supported for gemma"), npos)
        << e;
  }
  const Fixture untied("gemma", [](json& c) { c["tie_word_embeddings"] = false; });
  const std::string e = untied.error();
  EXPECT_NE(e.find("tie_word_embeddings"), npos) << e;
}

// Gemma's +1 in float32 from a bf16 checkpoint (the fixtures are f16).
TEST(HfFamilies, GemmaNormsPlusOneFromBf16) {
  HfFolderWriter w("gemma_bf16");
  w.add("model.embed_tokens.weight", {64, 32}, "BF16");
  w.add("model.norm.weight", {32}, "BF16");
  const std::string p = "model.layers.0.";
  for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"})
    w.add(p + n, {32}, "BF16");
  for (const char* n : {"q_proj", "k_proj", "v_proj"})
    w.add(p + "self_attn." + n + ".weight", {32, 32}, "BF16");
  w.add(p + "self_attn.o_proj.weight", {32, 32}, "BF16");
  for (const char* n : {"gate_proj", "up_proj"})
    w.add(p + "mlp." + n + ".weight", {48, 32}, "BF16");
  w.add(p + "mlp.down_proj.weight", {32, 48}, "BF16");
  w.write({{"architectures", {"GemmaForCausalLM"}},
           {"hidden_size", 32},
           {"intermediate_size", 48},
           {"num_hidden_layers", 1},
           {"num_attention_heads", 2},
           {"num_key_value_heads", 2},
           {"head_dim", 16},
           {"max_position_embeddings", 256},
           {"vocab_size", 64},
           {"rms_norm_eps", 1e-6},
           {"hidden_activation", "gelu_pytorch_tanh"}});
  ConvertOptions o;
  o.source.skip_hf_tokenizer = true;
  convert_to_jlm(w.dir(), w.file("out.jlm"), o);
  const ModelFile m = open_model_file(w.file("out.jlm"));
  const TensorInfo& norm = m.get("blk.0.attn_norm.weight");
  ASSERT_EQ(norm.type, QuantType::F32);
  const auto& src = w.tensor("model.layers.0.input_layernorm.weight").bytes;
  for (int i = 0; i < 32; ++i) {
    uint16_t h;
    std::memcpy(&h, src.data() + 2 * i, 2);
    float got;
    std::memcpy(&got, norm.data + 4 * i, 4);
    EXPECT_EQ(got, bf16_to_f32(h) + 1.0f) << i;
  }
  EXPECT_EQ(m.get("blk.0.attn_q.weight").type, QuantType::BF16);
}

// ---- gemma2 ------------------------------------------------------------------------------------

const std::map<std::string, std::string> kGemma2Norms = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

TEST(HfFamilies, Gemma2SoftcapsWindowPatternAndScale) {
  const Fixture f("gemma2");
  const ModelFile m = f.convert();
  const Metadata& md = m.metadata;
  expect_shape_keys(md, "gemma2", f.config());
  EXPECT_EQ(md.get_i64("gemma2.attention.key_length"), 48);
  EXPECT_EQ(md.get_f64("gemma2.attn_logit_softcapping"), 5.0);
  EXPECT_EQ(md.get_f64("gemma2.final_logit_softcapping"), 3.0);
  EXPECT_EQ(md.get_i64("gemma2.attention.sliding_window"), 24);
  EXPECT_EQ(bools(md, "gemma2.attention.sliding_window_pattern"), (std::vector<bool>{true, false}));
  EXPECT_EQ(md.get_f64("gemma2.attention.scale"), f32(1.0 / 8.0));  // query_pre_attn_scalar 64
  expect_tensors(m, f.dir(), projections_and(kGemma2Norms), {}, true);
  EXPECT_FALSE(md.get_bool("tokenizer.ggml.add_space_prefix"));
  EXPECT_FALSE(md.has("tokenizer.ggml.eot_token_id"));  // only Gemma 1's import names it

  // Before layer_types (transformers 4): the even layers slide.
  const Fixture legacy("gemma2", [](json& c) { c.erase("layer_types"); });
  EXPECT_EQ(bools(legacy.convert().metadata, "gemma2.attention.sliding_window_pattern"),
            (std::vector<bool>{true, false}));
}

TEST(HfFamilies, Gemma2Refusals) {
  const struct {
    std::function<void(json&)> edit;
    const char* says;
  } cases[] = {
      {[](json& c) { c["attn_logit_softcapping"] = nullptr; },
       "'attn_logit_softcapping' is missing"},
      {[](json& c) { c.erase("final_logit_softcapping"); }, "'final_logit_softcapping' is missing"},
      {[](json& c) { c.erase("sliding_window"); }, "'sliding_window' is missing"},
      {[](json& c) { c["layer_types"] = {"sliding_attention"}; }, "layer_types should list 2"},
      {[](json& c) {
         c["layer_types"] = {"sliding_attention", "chunked_attention"};
       },
       "layer_types holds \"chunked_attention\""},
      {[](json& c) { c["query_pre_attn_scalar"] = 0; }, "query_pre_attn_scalar is 0"},
      {[](json& c) { c.erase("head_dim"); }, "'head_dim' is missing"},
  };
  for (const auto& k : cases) {
    const Fixture f("gemma2", k.edit);
    const std::string e = f.error();
    EXPECT_NE(e.find(k.says), npos) << e;
  }
}

// ---- gemma3 ------------------------------------------------------------------------------------

std::map<std::string, std::string> gemma3_names() {
  std::map<std::string, std::string> n = kGemma2Norms;
  n["self_attn.q_norm.weight"] = "attn_q_norm.weight";
  n["self_attn.k_norm.weight"] = "attn_k_norm.weight";
  return projections_and(n);
}

TEST(HfFamilies, Gemma3WindowPatternRopeBasesAndQkNorms) {
  const Fixture f("gemma3");
  const ModelFile m = f.convert();
  const Metadata& md = m.metadata;
  expect_shape_keys(md, "gemma3", f.config());
  EXPECT_EQ(md.get_i64("gemma3.attention.key_length"), 48);
  EXPECT_EQ(md.get_i64("gemma3.attention.sliding_window"), 24);
  EXPECT_EQ(bools(md, "gemma3.attention.sliding_window_pattern"),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(md.get_f64("gemma3.rope.freq_base"), 1e6);      // full_attention
  EXPECT_EQ(md.get_f64("gemma3.rope.freq_base_swa"), 1e4);  // sliding_attention
  EXPECT_EQ(md.get_f64("gemma3.attention.scale"), f32(std::pow(48.0, -0.5)));
  EXPECT_FALSE(md.has("gemma3.final_logit_softcapping"));  // null
  EXPECT_FALSE(md.has("gemma3.attn_logit_softcapping"));
  EXPECT_FALSE(md.has("gemma3.rope.scaling.type"));
  expect_tensors(m, f.dir(), gemma3_names(), {}, true);
  EXPECT_EQ(m.get("blk.2.attn_q_norm.weight").shape, std::vector<int64_t>{48});  // per head
  EXPECT_EQ(m.get("blk.2.attn_k_norm.weight").shape, std::vector<int64_t>{48});
  EXPECT_FALSE(md.get_bool("tokenizer.ggml.add_space_prefix"));
}

TEST(HfFamilies, Gemma3LinearScalingSoftcapAndBothSpellings) {
  // transformers 5: per-layer-type rope_parameters; the full-attention layers scaled.
  const Fixture t5("gemma3", [](json& c) {
    c["rope_parameters"]["full_attention"] = {
        {"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}};
    c["final_logit_softcapping"] = 30.0;
  });
  const Metadata a = t5.convert().metadata;
  EXPECT_EQ(a.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(a.get_f64("gemma3.rope.scaling.factor"), 8.0);
  EXPECT_EQ(a.get_f64("gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(a.get_f64("gemma3.rope.freq_base_swa"), 1e4);
  EXPECT_EQ(a.get_f64("gemma3.final_logit_softcapping"), 30.0);

  // transformers 4: rope_theta + rope_local_base_freq + rope_scaling, and the pattern from
  // sliding_window_pattern (every 2nd layer full) instead of layer_types.
  const Fixture t4("gemma3", [](json& c) {
    c.erase("rope_parameters");
    c.erase("layer_types");
    c.erase("_sliding_window_pattern");
    c["rope_theta"] = 1e6;
    c["rope_local_base_freq"] = 5e3;
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  });
  const Metadata b = t4.convert().metadata;
  EXPECT_EQ(b.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(b.get_f64("gemma3.rope.scaling.factor"), 4.0);
  EXPECT_EQ(b.get_f64("gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(b.get_f64("gemma3.rope.freq_base_swa"), 5e3);
  EXPECT_EQ(bools(b, "gemma3.attention.sliding_window_pattern"),
            (std::vector<bool>{true, false, true}));

  // No "architectures": the text model by its model_type.
  const Fixture by_type("gemma3", [](json& c) { c.erase("architectures"); });
  EXPECT_EQ(by_type.convert().metadata.get_string("general.architecture"), "gemma3");
}

TEST(HfFamilies, Gemma3Refusals) {
  const struct {
    std::function<void(json&)> edit;
    const char* says;
  } cases[] = {
      {[](json& c) { c["attn_logit_softcapping"] = 50.0; }, "attn_logit_softcapping is 50"},
      {[](json& c) { c["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; },
       "rope type 'yarn' of the full-attention layers"},
      {[](json& c) { c["rope_parameters"]["sliding_attention"]["rope_type"] = "linear"; },
       "rope type 'linear' of the sliding-window layers"},
      {[](json& c) { c["sliding_window"] = nullptr; }, "'sliding_window' is missing"},
      {[](json& c) { c["hidden_activation"] = "gelu"; }, "hidden_activation 'gelu'"},
  };
  for (const auto& k : cases) {
    const Fixture f("gemma3", k.edit);
    const std::string e = f.error();
    EXPECT_NE(e.find(k.says), npos) << e;
  }
  // Every layer full: no window needed.
  const Fixture full("gemma3", [](json& c) {
    c["layer_types"] = {"full_attention", "full_attention", "full_attention"};
    c["sliding_window"] = nullptr;
  });
  EXPECT_FALSE(full.convert().metadata.has("gemma3.attention.sliding_window"));
}

// ---- phi3 --------------------------------------------------------------------------------------

const std::map<std::string, std::string> kPhi3Names = names_with({
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
});

TEST(HfFamilies, Phi3FusedProjectionsAndKeys) {
  const Fixture f("phi3");
  const ModelFile m = f.convert();
  const Metadata& md = m.metadata;
  expect_shape_keys(md, "phi3", f.config());
  EXPECT_EQ(md.get_i64("phi3.rope.scaling.original_context_length"), 4096);
  EXPECT_EQ(md.get_i64("phi3.rope.dimension_count"), 32);  // partial_rotary_factor 1.0
  EXPECT_EQ(md.get_f64("phi3.rope.freq_base"), 10000.0);
  EXPECT_EQ(md.get_i64("phi3.attention.sliding_window"), 0);  // null, as llama.cpp writes it
  EXPECT_FALSE(md.has("phi3.rope.scaling.attn_factor"));
  expect_tensors(m, f.dir(), kPhi3Names);
  // [n_embd, q_dim + 2 kv_dim] and [n_embd, 2 n_ff] in ne order (gate rows first).
  EXPECT_EQ(m.get("blk.0.attn_qkv.weight").shape, (std::vector<int64_t>{128, 384}));
  EXPECT_EQ(m.get("blk.0.ffn_up.weight").shape, (std::vector<int64_t>{128, 768}));
  EXPECT_EQ(m.get("blk.0.ffn_down.weight").shape, (std::vector<int64_t>{384, 128}));
}

json factors(int n, double first, double step) {
  json out = json::array();
  for (int i = 0; i < n; ++i) out.push_back(first + step * i);
  return out;
}

// LongRoPE with Phi-4-mini's partial rotary (0.75): n_rot = int(0.75 * 128) // 4 = 24, so 12
// factors each; context 1024 over an original 256 gives attn_factor sqrt(1 + ln 4 / ln 256).
void expect_longrope(const ModelFile& m) {
  const Metadata& md = m.metadata;
  EXPECT_EQ(md.get_i64("phi3.rope.dimension_count"), 24);
  EXPECT_EQ(md.get_i64("phi3.rope.scaling.original_context_length"), 256);
  EXPECT_EQ(md.get_f64("phi3.rope.scaling.attn_factor"),
            f32(std::sqrt(1.0 + std::log(4.0) / std::log(256.0))));
  for (const auto& [name, first, step] : {std::tuple{"rope_factors_long.weight", 1.0, 0.25},
                                          {"rope_factors_short.weight", 1.0, 0.01}}) {
    const TensorInfo& t = m.get(name);
    ASSERT_EQ(t.shape, std::vector<int64_t>{12}) << name;
    ASSERT_EQ(t.type, QuantType::F32);
    for (int i = 0; i < 12; ++i) {
      float got;
      std::memcpy(&got, t.data + 4 * i, 4);
      EXPECT_EQ(got, float(first + step * i)) << name << "[" << i << "]";
    }
  }
}

TEST(HfFamilies, Phi3LongRopeAndPartialRotaryInBothSpellings) {
  const Fixture t5("phi3", [](json& c) {
    c["rope_parameters"] = {{"rope_type", "longrope"},
                            {"rope_theta", 10000.0},
                            {"partial_rotary_factor", 0.75},
                            {"long_factor", factors(12, 1.0, 0.25)},
                            {"short_factor", factors(12, 1.0, 0.01)}};
    c["original_max_position_embeddings"] = 256;
  });
  const ModelFile a = t5.convert();
  expect_longrope(a);
  expect_tensors(a, t5.dir(), kPhi3Names,
                 {"rope_factors_long.weight", "rope_factors_short.weight"});

  const Fixture t4("phi3", [](json& c) {
    c.erase("rope_parameters");
    c["rope_theta"] = 10000.0;
    c["partial_rotary_factor"] = 0.75;
    c["original_max_position_embeddings"] = 256;
    c["rope_scaling"] = {{"type", "su"},
                         {"long_factor", factors(12, 1.0, 0.25)},
                         {"short_factor", factors(12, 1.0, 0.01)}};
  });
  expect_longrope(t4.convert());
}

TEST(HfFamilies, Phi3Refusals) {
  auto longrope = [](json& c) {
    c["rope_parameters"] = {{"rope_type", "longrope"},
                            {"rope_theta", 10000.0},
                            {"long_factor", factors(16, 1.0, 0.1)},
                            {"short_factor", factors(16, 1.0, 0.1)}};
  };
  const struct {
    std::function<void(json&)> edit;
    const char* says;
  } cases[] = {
      {[&](json& c) {
         longrope(c);
         c["rope_parameters"]["long_factor"] = factors(12, 1.0, 0.1);
       },
       "'long_factor' has 12 numbers; with 32 rotated dimensions it needs 16"},
      {[&](json& c) {
         longrope(c);
         c["rope_parameters"].erase("short_factor");
       },
       "LongRoPE needs 'short_factor'"},
      {[](json& c) { c["rope_parameters"]["rope_type"] = "yarn"; },
       "rope type 'yarn' is not supported for phi3"},
      {[](json& c) { c.erase("original_max_position_embeddings"); },
       "'original_max_position_embeddings' is missing"},
      {[](json& c) { c["rope_parameters"]["partial_rotary_factor"] = 0.3; },
       "partial_rotary_factor 0.3 rotates 9 dimensions"},
      {[](json& c) { c["head_dim"] = 16; },
       "head_dim 16 x num_attention_heads 4 is not hidden_size 128"},
      {[](json& c) { c.erase("rms_norm_eps"); }, "'rms_norm_eps' is missing"},
  };
  for (const auto& k : cases) {
    const Fixture f("phi3", k.edit);
    const std::string e = f.error();
    EXPECT_NE(e.find(k.says), npos) << e;
  }
}

// Written here: the fixtures hold no checkpoint with q/k/v stored apart, nor one with fewer kv
// heads than heads for olmo2.
void add_layer(HfFolderWriter& w, int il,
               const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  for (const auto& [name, shape] : tensors)
    w.add("model.layers." + std::to_string(il) + "." + name, shape, "F16");
}

TEST(HfFamilies, Phi3SeparateProjections) {
  HfFolderWriter w("phi3_apart");
  w.add("model.embed_tokens.weight", {64, 64}, "F16");
  w.add("model.norm.weight", {64}, "F16");
  w.add("lm_head.weight", {64, 64}, "F16");
  add_layer(w, 0,
            {{"input_layernorm.weight", {64}},
             {"post_attention_layernorm.weight", {64}},
             {"self_attn.q_proj.weight", {64, 64}},
             {"self_attn.k_proj.weight", {32, 64}},
             {"self_attn.v_proj.weight", {32, 64}},
             {"self_attn.o_proj.weight", {64, 64}},
             {"mlp.gate_up_proj.weight", {192, 64}},
             {"mlp.down_proj.weight", {64, 96}}});
  w.write({{"architectures", {"Phi3ForCausalLM"}},
           {"hidden_size", 64},
           {"intermediate_size", 96},
           {"num_hidden_layers", 1},
           {"num_attention_heads", 4},
           {"num_key_value_heads", 2},
           {"max_position_embeddings", 512},
           {"original_max_position_embeddings", 512},
           {"vocab_size", 64},
           {"rms_norm_eps", 1e-5}});
  ConvertOptions o;
  o.source.skip_hf_tokenizer = true;
  convert_to_jlm(w.dir(), w.file("out.jlm"), o);
  const ModelFile m = open_model_file(w.file("out.jlm"));
  EXPECT_EQ(m.get("blk.0.attn_q.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(m.get("blk.0.attn_k.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(m.get("blk.0.attn_v.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(m.find("blk.0.attn_qkv.weight"), nullptr);
  // Not permuted (NEOX rope).
  const auto& k = w.tensor("model.layers.0.self_attn.k_proj.weight").bytes;
  EXPECT_EQ(0, std::memcmp(m.get("blk.0.attn_k.weight").data, k.data(), k.size()));
}

// ---- olmo2 -------------------------------------------------------------------------------------

const std::map<std::string, std::string> kOlmo2Norms = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

TEST(HfFamilies, Olmo2PostNormsAndWholeProjectionQkNorms) {
  const Fixture f("olmo2");
  const ModelFile m = f.convert();
  expect_shape_keys(m.metadata, "olmo2", f.config());
  EXPECT_EQ(m.metadata.get_f64("olmo2.rope.freq_base"), 500000.0);
  expect_tensors(m, f.dir(), projections_and(kOlmo2Norms));
  EXPECT_EQ(m.find("blk.0.attn_norm.weight"), nullptr);
  EXPECT_EQ(m.find("blk.0.ffn_norm.weight"), nullptr);
  EXPECT_EQ(m.get("blk.0.attn_q_norm.weight").shape, std::vector<int64_t>{128});  // q_dim

  const Fixture windowed("olmo2", [](json& c) { c["sliding_window"] = 4096; });
  const std::string e = windowed.error();
  EXPECT_NE(e.find("sliding_window is set"), npos) << e;
}

TEST(HfFamilies, Olmo2KNormSpansTheKvProjection) {
  HfFolderWriter w("olmo2_gqa");
  w.add("model.embed_tokens.weight", {64, 64}, "F16");
  w.add("model.norm.weight", {64}, "F16");
  w.add("lm_head.weight", {64, 64}, "F16");
  add_layer(w, 0,
            {{"self_attn.q_proj.weight", {64, 64}},
             {"self_attn.k_proj.weight", {32, 64}},
             {"self_attn.v_proj.weight", {32, 64}},
             {"self_attn.o_proj.weight", {64, 64}},
             {"self_attn.q_norm.weight", {64}},
             {"self_attn.k_norm.weight", {32}},
             {"post_attention_layernorm.weight", {64}},
             {"post_feedforward_layernorm.weight", {64}},
             {"mlp.gate_proj.weight", {96, 64}},
             {"mlp.up_proj.weight", {96, 64}},
             {"mlp.down_proj.weight", {64, 96}}});
  nlohmann::json config = {{"architectures", {"Olmo2ForCausalLM"}},
                           {"hidden_size", 64},
                           {"intermediate_size", 96},
                           {"num_hidden_layers", 1},
                           {"num_attention_heads", 4},
                           {"num_key_value_heads", 2},
                           {"max_position_embeddings", 512},
                           {"vocab_size", 64},
                           {"rms_norm_eps", 1e-6},
                           {"rope_theta", 500000.0}};
  w.write(config);
  ConvertOptions o;
  o.source.skip_hf_tokenizer = true;
  convert_to_jlm(w.dir(), w.file("out.jlm"), o);
  const ModelFile m = open_model_file(w.file("out.jlm"));
  EXPECT_EQ(m.get("blk.0.attn_q_norm.weight").shape, std::vector<int64_t>{64});  // 4 heads x 16
  EXPECT_EQ(m.get("blk.0.attn_k_norm.weight").shape, std::vector<int64_t>{32});  // 2 kv heads x 16

  w.add("model.layers.0.self_attn.mystery.weight", {64}, "F16");
  w.write(config);
  // An unknown tensor is an error naming it, not a tensor silently left out.
  const std::string e = error_of([&] { convert_to_jlm(w.dir(), w.file("out.jlm"), o); });
  EXPECT_NE(e.find("'model.layers.0.self_attn.mystery.weight' is not part of the olmo2"), npos)
      << e;
}

}  // namespace
}  // namespace jitllm
