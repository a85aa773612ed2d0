// jitllm synth's real shapes: the published hyperparameters of each new model, and its GGUF names
// and keys exactly as the HF converter writes them for the same family (compared against the
// conversion of that family's tiny fixture, so synth files and converted checkpoints load alike).
// The files themselves are written at scaled-down sizes (a real shape is gigabytes) and read back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "convert/convert.h"
#include "convert/synth.h"
#include "io/model_file.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(JITLLM_SOURCE_DIR) + "/tests/model/data/";

class TempDir {
 public:
  TempDir() {
    dir_ = fs::temp_directory_path() / ("jlm_synth_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  std::string file(const std::string& n) const { return (dir_ / n).string(); }

 private:
  fs::path dir_;
};

int64_t count_true(const Metadata& m, const std::string& key) {
  int64_t n = 0;
  for (const Value& v : m.at(key).as_array().items) n += v.as_bool();
  return n;
}

const SynthTensor* find(const std::vector<SynthTensor>& ts, const std::string& name) {
  for (const SynthTensor& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(Synth, RealShapesCarryTheirPublishedHyperparameters) {
  {
    const SynthShape& s = synth_shape("gemma-3-12b");
    const Metadata m = synth_metadata(s, "q4_k_m");
    EXPECT_EQ(m.get_i64("gemma3.block_count"), 48);
    EXPECT_EQ(m.get_i64("gemma3.embedding_length"), 3840);
    EXPECT_EQ(m.get_i64("gemma3.attention.key_length"), 256);
    EXPECT_EQ(m.get_i64("gemma3.attention.sliding_window"), 1024);
    EXPECT_EQ(count_true(m, "gemma3.attention.sliding_window_pattern"), 40);  // 5 of every 6
    EXPECT_FALSE(m.at("gemma3.attention.sliding_window_pattern").as_array().items[5].as_bool());
    EXPECT_EQ(m.get_f64("gemma3.rope.freq_base"), 1e6);
    EXPECT_EQ(m.get_f64("gemma3.rope.freq_base_swa"), 1e4);
    EXPECT_EQ(m.get_string("gemma3.rope.scaling.type"), "linear");
    EXPECT_EQ(m.get_f64("gemma3.rope.scaling.factor"), 8.0);
    EXPECT_EQ(m.get_f64("gemma3.attention.scale"), 0.0625);  // 256^-0.5
    EXPECT_EQ(m.at("tokenizer.ggml.tokens").as_array().items.size(), 262208u);
    EXPECT_EQ(find(synth_tensors(s, "q4_k_m"), "output.weight"), nullptr);  // tied
  }
  {
    const Metadata m = synth_metadata(synth_shape("gemma-2-9b"), "q4_k_m");
    EXPECT_EQ(m.get_i64("gemma2.block_count"), 42);
    EXPECT_EQ(m.get_f64("gemma2.attn_logit_softcapping"), 50.0);
    EXPECT_EQ(m.get_f64("gemma2.final_logit_softcapping"), 30.0);
    EXPECT_EQ(m.get_i64("gemma2.attention.sliding_window"), 4096);
    EXPECT_EQ(count_true(m, "gemma2.attention.sliding_window_pattern"), 21);
    EXPECT_TRUE(m.at("gemma2.attention.sliding_window_pattern").as_array().items[0].as_bool());
  }
  {
    const SynthShape& s = synth_shape("phi-4-mini");
    const Metadata m = synth_metadata(s, "q4_k_m");
    EXPECT_EQ(m.get_i64("phi3.rope.dimension_count"), 96);  // 0.75 x 128
    EXPECT_EQ(m.get_i64("phi3.rope.scaling.original_context_length"), 4096);
    EXPECT_EQ(m.get_f64("phi3.rope.scaling.attn_factor"),
              double(float(std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)))));
    const std::vector<SynthTensor> ts = synth_tensors(s, "q4_k_m");
    ASSERT_NE(find(ts, "rope_factors_long.weight"), nullptr);
    EXPECT_EQ(find(ts, "rope_factors_long.weight")->shape, std::vector<int64_t>{48});
    EXPECT_EQ(find(ts, "blk.0.attn_qkv.weight")->shape, (std::vector<int64_t>{3072, 5120}));
    EXPECT_EQ(find(ts, "blk.0.attn_qkv.weight")->type, QuantType::Q5_K);  // llama-quantize's rule
    EXPECT_EQ(find(ts, "blk.0.ffn_up.weight")->shape, (std::vector<int64_t>{3072, 16384}));
    EXPECT_EQ(find(ts, "token_embd.weight")->type, QuantType::Q6_K);  // tied: the output head
  }
  {
    const Metadata m = synth_metadata(synth_shape("mistral-7b"), "q4_k_m");
    EXPECT_EQ(m.get_string("general.architecture"), "llama");
    EXPECT_EQ(m.get_i64("llama.attention.sliding_window"), 4096);
    EXPECT_EQ(m.get_i64("llama.vocab_size"), 32000);
  }
  {
    const SynthShape& s = synth_shape("olmo2-7b");
    const std::vector<SynthTensor> ts = synth_tensors(s, "q4_k_m");
    EXPECT_EQ(find(ts, "blk.0.attn_norm.weight"), nullptr);
    EXPECT_EQ(find(ts, "blk.0.attn_q_norm.weight")->shape, std::vector<int64_t>{4096});
    EXPECT_EQ(synth_metadata(s, "q4_k_m").get_f64("olmo2.rope.freq_base"), 500000.0);
  }
  {
    const SynthShape& s = synth_shape("qwen3-4b");
    EXPECT_EQ(find(synth_tensors(s, "q4_k_m"), "output.weight"), nullptr);  // tied
    EXPECT_EQ(find(synth_tensors(s, "q4_k_m"), "blk.35.attn_k_norm.weight")->shape,
              std::vector<int64_t>{128});
  }
}

// "blk.N.x" -> "x"; model-wide names as they are.
std::set<std::string> name_kinds(const std::vector<std::string>& names) {
  std::set<std::string> out;
  for (const std::string& n : names)
    out.insert(n.starts_with("blk.") ? n.substr(n.find('.', 4) + 1) : n);
  return out;
}

// A real shape at a size a test can write: 256 wide, 4 heads of 64 (2 kv), enough layers for one
// period of the sliding pattern.
SynthShape scaled_down(SynthShape s) {
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_head = 4;
  s.n_head_kv = s.n_head_kv == s.n_head ? 4 : 2;
  if (s.n_rot > 0) s.n_rot = 64 * s.n_rot / s.head_dim;
  s.head_dim = 64;
  s.n_vocab = 512;
  s.n_layer = s.sliding_period > 0 ? s.sliding_period + 1 : 2;
  if (s.n_expert > 0) {
    s.n_expert = 4;
    s.n_expert_used = 2;
    if (s.n_ff_exp > 0) s.n_ff_exp = 256;
  }
  return s;
}

// Each new shape, scaled down, written and read back, against the HF converter's output for its
// family's fixture: the same tensor names (per layer), and every "<arch>.*" key the converter
// writes present with the same value type. Keys synth adds beyond those are what the real model's
// config sets and the fixture's does not (rope scaling, soft-caps, LongRoPE).
TEST(Synth, ScaledDownFilesHaveTheConvertersNamesAndKeys) {
  const TempDir dir;
  const struct {
    const char* shape;
    const char* fixture;
    std::set<std::string> extra_keys;  // beyond the fixture's conversion
  } cases[] = {
      {"qwen3-4b", "qwen3", {}},
      {"mistral-7b", "mistral", {}},
      {"gemma-2-9b", "gemma2", {}},
      {"gemma-3-4b", "gemma3", {"rope.scaling.type", "rope.scaling.factor"}},
      {"gemma-3-12b", "gemma3", {"rope.scaling.type", "rope.scaling.factor"}},
      {"phi-4-mini",
       "phi3",
       {"rope.scaling.attn_factor", "attention.key_length", "attention.value_length"}},
      {"olmo2-7b", "olmo2", {"attention.key_length", "attention.value_length"}},
      {"qwen3-30b-a3b", "qwen3moe", {}},
      {"olmoe-1b-7b", "olmoe", {"attention.key_length", "attention.value_length"}},
      {"mixtral-8x7b",
       "mixtral",
       {"attention.key_length", "attention.value_length", "expert_weights_norm"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.shape);
    const SynthShape s = scaled_down(synth_shape(c.shape));
    const std::string gguf = dir.file(std::string(c.shape) + ".gguf");
    write_synth_model(gguf, s, "q4_k_m", 1);
    const ModelFile synth = open_model_file(gguf);

    // What synth planned is what the file holds.
    const std::vector<SynthTensor> plan = synth_tensors(s, "q4_k_m");
    ASSERT_EQ(synth.tensors.size(), plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(synth.tensors[i].name, plan[i].name);
      EXPECT_EQ(synth.tensors[i].type, plan[i].type) << plan[i].name;
      EXPECT_EQ(synth.tensors[i].shape, plan[i].shape) << plan[i].name;
    }
    const Metadata planned = synth_metadata(s, "q4_k_m");
    for (const auto& [key, value] : planned.entries())
      EXPECT_TRUE(synth.metadata.at(key) == value) << key;

    ConvertOptions o;
    o.source.skip_hf_tokenizer = true;
    const std::string jlm = dir.file(std::string(c.shape) + ".jlm");
    convert_to_jlm(kData + c.fixture + "-tiny", jlm, o);
    const ModelFile hf = open_model_file(jlm);
    EXPECT_EQ(synth.metadata.architecture(), hf.metadata.architecture());

    std::vector<std::string> synth_names, hf_names;
    for (const TensorInfo& t : synth.tensors)
      if (t.name != "output.weight" && !t.name.starts_with("rope_factors_"))
        synth_names.push_back(t.name);
    for (const TensorInfo& t : hf.tensors)
      if (t.name != "output.weight") hf_names.push_back(t.name);
    EXPECT_EQ(name_kinds(synth_names), name_kinds(hf_names));

    const std::string a = synth.metadata.architecture() + ".";
    for (const auto& [key, value] : hf.metadata.entries()) {
      if (!key.starts_with(a)) continue;
      const Value* mine = synth.metadata.find(key);
      ASSERT_NE(mine, nullptr) << key << " is written by the converter, not by synth";
      EXPECT_EQ(mine->type(), value.type()) << key;
      if (value.type() == ValueType::Array) {
        EXPECT_EQ(mine->as_array().element_type, value.as_array().element_type) << key;
      }
    }
    for (const auto& [key, value] : synth.metadata.entries())
      if (key.starts_with(a) && !hf.metadata.has(key)) {
        EXPECT_TRUE(c.extra_keys.count(key.substr(a.size()))) << key << " is synth's alone";
      }
  }
}

// deepseek2 as llama.cpp's converter writes DeepSeek-V2-Lite: MLA's absorbed-MQA keys (1 KV head
// of 512 + 64, V of 512, key/value_length_mla 192 / 128), the split attn_k_b / attn_v_b per head,
// a dense first layer, 64 experts of 1408 and 2 shared; attn_k_b's rows of 128 take
// llama-quantize's fallback for Q4_K (Q5_0). tiny-deepseek2 is written and read back.
TEST(Synth, DeepseekShapesAreLlamaCppsMla) {
  const SynthShape& s = synth_shape("deepseek-v2-lite");
  const Metadata m = synth_metadata(s, "q4_k_m");
  EXPECT_EQ(m.get_i64("deepseek2.attention.head_count_kv"), 1);
  EXPECT_EQ(m.get_i64("deepseek2.attention.key_length"), 576);
  EXPECT_EQ(m.get_i64("deepseek2.attention.value_length"), 512);
  EXPECT_EQ(m.get_i64("deepseek2.attention.key_length_mla"), 192);
  EXPECT_EQ(m.get_i64("deepseek2.attention.value_length_mla"), 128);
  EXPECT_EQ(m.get_i64("deepseek2.rope.dimension_count"), 64);
  EXPECT_EQ(m.get_i64("deepseek2.leading_dense_block_count"), 1);
  EXPECT_EQ(m.get_i64("deepseek2.expert_shared_count"), 2);
  EXPECT_FALSE(m.has("deepseek2.attention.q_lora_rank"));  // V2-Lite projects q directly
  EXPECT_NEAR(m.get_f64("deepseek2.rope.scaling.yarn_log_multiplier"), 0.0707, 1e-6);
  const std::vector<SynthTensor> ts = synth_tensors(s, "q4_k_m");
  EXPECT_EQ(find(ts, "blk.0.attn_q.weight")->shape, (std::vector<int64_t>{2048, 3072}));
  EXPECT_EQ(find(ts, "blk.0.attn_kv_a_mqa.weight")->shape, (std::vector<int64_t>{2048, 576}));
  EXPECT_EQ(find(ts, "blk.0.attn_k_b.weight")->shape, (std::vector<int64_t>{128, 512, 16}));
  EXPECT_EQ(find(ts, "blk.0.attn_k_b.weight")->type, QuantType::Q5_0);
  EXPECT_EQ(find(ts, "blk.0.attn_v_b.weight")->shape, (std::vector<int64_t>{512, 128, 16}));
  EXPECT_EQ(find(ts, "blk.0.attn_output.weight")->shape, (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(find(ts, "blk.0.ffn_gate.weight")->shape, (std::vector<int64_t>{2048, 10944}));
  EXPECT_EQ(find(ts, "blk.0.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(find(ts, "blk.26.ffn_gate_exps.weight")->shape, (std::vector<int64_t>{2048, 1408, 64}));
  EXPECT_EQ(find(ts, "blk.26.ffn_down_shexp.weight")->shape, (std::vector<int64_t>{2816, 2048}));

  const TempDir dir;
  const std::string gguf = dir.file("tiny-deepseek2.gguf");
  write_synth_model(gguf, "tiny-deepseek2", "q4_k_m", 1);
  const ModelFile f = open_model_file(gguf);
  const std::vector<SynthTensor> plan = synth_tensors(synth_shape("tiny-deepseek2"), "q4_k_m");
  ASSERT_EQ(f.tensors.size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, plan[i].name);
    EXPECT_EQ(f.tensors[i].shape, plan[i].shape) << plan[i].name;
  }
  EXPECT_EQ(f.metadata.architecture(), "deepseek2");
}

TEST(Synth, UnknownShapeNamesTheKnownOnes) {
  try {
    synth_shape("gemma-7b");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("phi-4-mini"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace jitllm
