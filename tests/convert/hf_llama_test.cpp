// HF llama-family folders written here (config.json + model.safetensors): tied embeddings, BF16
// checkpoints, llama3 / linear rope scaling, Mixtral experts stacked then split into expert
// pages, and unknown tensors refused. pydoc-llama (convert_test.cpp) is the bitwise oracle for the
// plain case; these cover the config variants it does not have.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "convert/convert.h"
#include "convert/hf_folder_writer.h"
#include "core/error.h"
#include "core/fp16.h"
#include "io/jlm_reader.h"
#include "io/model_file.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;
using testing::HfFolderWriter;

nlohmann::json llama_config(int layers, int hidden, int heads, int kv_heads, int ff, int vocab) {
  return {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", hidden},
          {"intermediate_size", ff}, {"num_hidden_layers", layers},
          {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0}, {"max_position_embeddings", 4096},
          {"vocab_size", vocab}, {"tie_word_embeddings", false}};
}

void add_dense_llama(HfFolderWriter& w, int layers, int hidden, int kv_dim, int ff, int vocab,
                     const std::string& dtype, bool moe = false, int experts = 0) {
  w.add("model.embed_tokens.weight", {vocab, hidden}, dtype);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.add(p + "input_layernorm.weight", {hidden}, dtype);
    w.add(p + "post_attention_layernorm.weight", {hidden}, dtype);
    w.add(p + "self_attn.q_proj.weight", {hidden, hidden}, dtype);
    w.add(p + "self_attn.k_proj.weight", {kv_dim, hidden}, dtype);
    w.add(p + "self_attn.v_proj.weight", {kv_dim, hidden}, dtype);
    w.add(p + "self_attn.o_proj.weight", {hidden, hidden}, dtype);
    if (moe) {
      w.add(p + "block_sparse_moe.gate.weight", {experts, hidden}, dtype);
      for (int e = 0; e < experts; ++e) {
        const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
        w.add(x + "w1.weight", {ff, hidden}, dtype);
        w.add(x + "w2.weight", {hidden, ff}, dtype);
        w.add(x + "w3.weight", {ff, hidden}, dtype);
      }
    } else {
      w.add(p + "mlp.gate_proj.weight", {ff, hidden}, dtype);
      w.add(p + "mlp.up_proj.weight", {ff, hidden}, dtype);
      w.add(p + "mlp.down_proj.weight", {hidden, ff}, dtype);
    }
  }
  w.add("model.norm.weight", {hidden}, dtype);
}

ConvertOptions no_tokenizer() {
  ConvertOptions o;
  o.source.skip_hf_tokenizer = true;
  return o;
}

TEST(HfLlama, TiedBf16WithLlama3RopeScaling) {
  HfFolderWriter w("tied");
  add_dense_llama(w, 2, 128, 64, 256, 100, "BF16");
  w.add("lm_head.weight", {100, 128}, "BF16");  // stored although tied: dropped, as GGUF does
  auto config = llama_config(2, 128, 4, 2, 256, 100);
  config["tie_word_embeddings"] = true;
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  w.write(config);
  const std::string out = w.file("out.jlm");
  convert_to_jlm(w.dir(), out, no_tokenizer());
  const ModelFile m = open_model_file(out);
  EXPECT_EQ(m.find("output.weight"), nullptr);
  EXPECT_EQ(m.get("token_embd.weight").type, QuantType::BF16);
  EXPECT_EQ(m.get("blk.1.ffn_down.weight").type, QuantType::BF16);
  EXPECT_EQ(m.metadata.get_i64("general.file_type"), 32);  // LLAMA_FTYPE_MOSTLY_BF16
  // Norms become F32 with the same values (BF16 -> F32 is exact).
  const TensorInfo& norm = m.get("blk.0.attn_norm.weight");
  ASSERT_EQ(norm.type, QuantType::F32);
  const auto& hf_norm = w.tensor("model.layers.0.input_layernorm.weight").bytes;
  for (int i = 0; i < 128; ++i) {
    uint16_t h;
    std::memcpy(&h, hf_norm.data() + 2 * i, 2);
    float f;
    std::memcpy(&f, norm.data + 4 * i, 4);
    EXPECT_EQ(f, bf16_to_f32(h)) << i;
  }
  // v_proj is not permuted: bytes identical to the checkpoint.
  const auto& v = w.tensor("model.layers.1.self_attn.v_proj.weight").bytes;
  EXPECT_EQ(0, std::memcmp(m.get("blk.1.attn_v.weight").data, v.data(), v.size()));
  // llama3 scaling (Meta's definition): factor 1 for wavelengths under 8192/4, `factor` above
  // 8192/1, smooth and monotonic in between; head_dim 32 -> 16 factors.
  const TensorInfo& rf = m.get("rope_freqs.weight");
  ASSERT_EQ(rf.shape, std::vector<int64_t>{16});
  std::vector<float> f(16);
  std::memcpy(f.data(), rf.data, 64);
  for (int i = 0; i < 16; ++i) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * i / 32);
    if (wavelen < 2048) {
      EXPECT_EQ(f[i], 1.0f) << i;
    }
    if (wavelen > 8192) {
      EXPECT_EQ(f[i], 8.0f) << i;
    }
    if (i > 0) {
      EXPECT_GE(f[i], f[i - 1]) << i;
    }
  }
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[15], 8.0f);
  EXPECT_EQ(m.metadata.get_f64("llama.rope.freq_base"), 500000.0);
  EXPECT_FALSE(m.metadata.has("llama.rope.scaling.type"));
}

TEST(HfLlama, MixtralExpertsAreStackedThenPagedPerExpert) {
  HfFolderWriter w("moe");
  const int experts = 4, hidden = 64, ff = 96;
  add_dense_llama(w, 2, hidden, 32, ff, 50, "F32", true, experts);
  w.add("lm_head.weight", {50, hidden});
  auto config = llama_config(2, hidden, 4, 2, ff, 50);
  config["architectures"] = {"MixtralForCausalLM"};
  config["num_local_experts"] = experts;
  config["num_experts_per_tok"] = 2;
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  w.write(config);
  const std::string out = w.file("out.jlm");
  convert_to_jlm(w.dir(), out, no_tokenizer());
  const ModelFile m = open_model_file(out);
  EXPECT_EQ(m.metadata.get_i64("llama.expert_count"), experts);
  EXPECT_EQ(m.metadata.get_i64("llama.expert_used_count"), 2);
  EXPECT_EQ(m.metadata.get_string("llama.rope.scaling.type"), "linear");
  EXPECT_EQ(m.metadata.get_f64("llama.rope.scaling.factor"), 2.0);
  EXPECT_EQ(m.get("blk.0.ffn_gate_inp.weight").shape, (std::vector<int64_t>{hidden, experts}));
  const struct {
    const char* gguf;
    const char* hf;
    std::vector<int64_t> ne;
  } stacked[] = {{"ffn_gate_exps.weight", "w1.weight", {hidden, ff, experts}},
                 {"ffn_down_exps.weight", "w2.weight", {ff, hidden, experts}},
                 {"ffn_up_exps.weight", "w3.weight", {hidden, ff, experts}}};
  for (const auto& s : stacked) {
    const TensorInfo& t = m.get(std::string("blk.1.") + s.gguf);
    EXPECT_EQ(t.shape, s.ne) << s.gguf;
    ASSERT_NE(t.slice_stride, 0u) << s.gguf;
    for (int e = 0; e < experts; ++e) {
      const auto& want =
          w.tensor("model.layers.1.block_sparse_moe.experts." + std::to_string(e) + "." + s.hf).bytes;
      EXPECT_EQ(0, std::memcmp(t.data + e * t.slice_stride, want.data(), want.size()))
          << s.gguf << " expert " << e;
    }
  }
  const JlmFile f = JlmFile::open(out);
  size_t expert_groups = 0;
  for (const JlmGroup& g : f.groups()) expert_groups += g.kind == JlmGroupKind::Expert;
  EXPECT_EQ(expert_groups, 2u * experts);
}

TEST(HfLlama, UnknownTensorsAndMissingExpertsAreErrors) {
  auto error_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  {
    HfFolderWriter w("unknown");
    add_dense_llama(w, 1, 64, 32, 96, 50, "F32");
    w.add("model.layers.0.mystery.weight", {64});
    w.write(llama_config(1, 64, 4, 2, 96, 50));
    const std::string e = error_of([&] { convert_to_jlm(w.dir(), w.file("o.jlm"), no_tokenizer()); });
    EXPECT_NE(e.find("model.layers.0.mystery.weight"), std::string::npos) << e;
  }
  {
    HfFolderWriter w("gap");
    w.add("model.embed_tokens.weight", {50, 64});
    w.add("model.layers.0.block_sparse_moe.experts.0.w1.weight", {96, 64});
    w.add("model.layers.0.block_sparse_moe.experts.2.w1.weight", {96, 64});
    auto config = llama_config(1, 64, 4, 2, 96, 50);
    config["architectures"] = {"MixtralForCausalLM"};
    config["num_local_experts"] = 3;
    config["num_experts_per_tok"] = 1;
    w.write(config);
    const std::string e = error_of([&] { convert_to_jlm(w.dir(), w.file("o.jlm"), no_tokenizer()); });
    EXPECT_NE(e.find("expert 1 of 'blk.0.ffn_gate_exps.weight' is missing"), std::string::npos) << e;
  }
  {
    HfFolderWriter w("noheads");
    add_dense_llama(w, 1, 64, 32, 96, 50, "F32");
    auto config = llama_config(1, 64, 4, 2, 96, 50);
    config.erase("num_attention_heads");
    w.write(config);
    const std::string e = error_of([&] { convert_to_jlm(w.dir(), w.file("o.jlm"), no_tokenizer()); });
    EXPECT_NE(e.find("num_attention_heads"), std::string::npos) << e;
  }
}

std::string convert_error(const HfFolderWriter& w) {
  try {
    convert_to_jlm(w.dir(), w.file("o.jlm"), no_tokenizer());
  } catch (const Error& e) {
    EXPECT_FALSE(fs::exists(w.file("o.jlm")));
    return e.what();
  }
  return "";
}

// num_hidden_layers: 5 over a 10-layer checkpoint loaded 5 layers and generated; 12 over it
// converted and failed only at load.
TEST(HfLlama, NumHiddenLayersMustMatchTheCheckpoint) {
  HfFolderWriter w("layers");
  add_dense_llama(w, 10, 64, 32, 96, 50, "F32");
  w.write(llama_config(5, 64, 4, 2, 96, 50));
  std::string e = convert_error(w);
  EXPECT_NE(e.find("config.json: num_hidden_layers is 5 but the checkpoint has tensors of layers "
                   "5..9 ('model.layers.5."),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(w.dir()), std::string::npos) << e;
  w.write(llama_config(12, 64, 4, 2, 96, 50));
  e = convert_error(w);
  EXPECT_NE(e.find("num_hidden_layers is 12 but the checkpoint has no tensors of layers 10..11"),
            std::string::npos)
      << e;
  w.write(llama_config(1 << 30, 64, 4, 2, 96, 50));  // the gap is reported, not walked
  e = convert_error(w);
  EXPECT_NE(e.find("no tensors of layers 10..1073741823"), std::string::npos) << e;
  w.write(llama_config(10, 64, 4, 2, 96, 50));
  EXPECT_NO_THROW(convert_to_jlm(w.dir(), w.file("o.jlm"), no_tokenizer()));
}

TEST(HfLlama, GapInTheLayersIsNamed) {
  HfFolderWriter w("gaps");
  add_dense_llama(w, 2, 64, 32, 96, 50, "F32");
  w.add("model.layers.3.input_layernorm.weight", {64});
  w.write(llama_config(4, 64, 4, 2, 96, 50));
  const std::string e = convert_error(w);
  EXPECT_NE(e.find("num_hidden_layers is 4 but the checkpoint has no tensors of layer 2 "
                   "(no 'model.layers.2.*')"),
            std::string::npos)
      << e;
}

// max_position_embeddings 2^32 + 300 became 300 (the u32 cast); every integer is range-checked.
TEST(HfLlama, ConfigIntegersAreRangeCheckedNotNarrowed) {
  HfFolderWriter w("ranges");
  add_dense_llama(w, 1, 64, 32, 96, 50, "F32");
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* says;
  };
  const Case cases[] = {
      {"max_position_embeddings", (int64_t(1) << 32) + 300,
       "config.json: 'max_position_embeddings' is 4294967596, outside the supported range [1, 1073741824]"},
      {"hidden_size", 0, "'hidden_size' is 0, outside"},
      {"num_attention_heads", -4, "'num_attention_heads' is -4, outside"},
      {"num_key_value_heads", uint64_t(18446744073709551615ull), "'num_key_value_heads' is 18446744073709551615, too large"},
      {"intermediate_size", 1e300, "'intermediate_size' should be an integer"},
      {"vocab_size", 4294967346.0, "'vocab_size' is 4294967346, outside"},
      {"head_dim", "32", "'head_dim' should be an integer"},
  };
  for (const Case& c : cases) {
    auto config = llama_config(1, 64, 4, 2, 96, 50);
    config[c.key] = c.value;
    w.write(config);
    const std::string e = convert_error(w);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.key << ": " << e;
  }
  auto config = llama_config(1, 64, 4, 2, 96, 50);
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0},
                            {"original_max_position_embeddings", int64_t(1) << 33}};
  w.write(config);
  const std::string e = convert_error(w);
  EXPECT_NE(e.find("'original_max_position_embeddings' is 8589934592, outside"), std::string::npos) << e;
}

}  // namespace
}  // namespace jitllm
