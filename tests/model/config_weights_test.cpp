// Config from metadata and weight binding: values of the synthetic fixture (README table),
// missing keys and wrong shapes as clear errors naming the key / tensor, tied embeddings, llama3
// rope factors, partial rotary and GQA validation.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "io/model_file.h"
#include "model/config.h"
#include "model/weights.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

ModelFile fixture() { return open_model_file(oracle_path("models/synth-llama.F32.gguf")); }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Config, ReadsTheFixtureHyperparameters) {
  const ModelFile f = fixture();
  const Config c = config_from_metadata(f.metadata);
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_embd, 256);
  EXPECT_EQ(c.n_ff, 768);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_rot, 64);
  EXPECT_EQ(c.n_ctx_train, 2048);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 10000.0f);
  EXPECT_EQ(c.rope_mode, RopeMode::Normal);
  EXPECT_TRUE(c.rope_freq_factors.empty());
}

TEST(Config, MissingOrBadKeysNameTheKey) {
  const ModelFile f = fixture();
  for (const char* key : {"llama.block_count", "llama.embedding_length",
                          "llama.feed_forward_length", "llama.attention.head_count",
                          "llama.attention.layer_norm_rms_epsilon", "llama.context_length"}) {
    Metadata md = f.metadata;
    md.erase(key);
    EXPECT_NE(error_of([&] { config_from_metadata(md); }).find(key), std::string::npos) << key;
  }
  Metadata md = f.metadata;
  md.set("llama.attention.head_count_kv", Value::u32(3));
  EXPECT_NE(error_of([&] { config_from_metadata(md); }).find("head_count_kv"), std::string::npos);
  md = f.metadata;
  md.set("general.architecture", Value::string("gpt5"));
  EXPECT_NE(error_of([&] { config_from_metadata(md); }).find("gpt5"), std::string::npos);
  md = f.metadata;
  md.set("llama.rope.scaling.type", Value::string("banana"));
  EXPECT_NE(error_of([&] { config_from_metadata(md); }).find("banana"), std::string::npos);
  md = f.metadata;
  md.set("llama.rope.dimension_count", Value::u32(65));
  EXPECT_NE(error_of([&] { config_from_metadata(md); }).find("rope.dimension_count"),
            std::string::npos);
}

TEST(Config, RopeScalingVariants) {
  const ModelFile f = fixture();
  Metadata md = f.metadata;
  md.set("llama.rope.scaling.type", Value::string("linear"));
  md.set("llama.rope.scaling.factor", Value::f32(4.0f));
  EXPECT_FLOAT_EQ(config_from_metadata(md).rope_freq_scale, 0.25f);

  // llama3 (Meta's published rule): factor 8, low 1, high 4, original context 8192. With base
  // 10000 and 64 dims the highest frequencies keep factor 1 and the lowest get 8.
  md = f.metadata;
  md.set("llama.rope.scaling.type", Value::string("llama3"));
  md.set("llama.rope.scaling.factor", Value::f32(8.0f));
  md.set("llama.rope.scaling.original_context_length", Value::u32(8192));
  const Config c = config_from_metadata(md);
  ASSERT_EQ(c.rope_freq_factors.size(), 32u);
  EXPECT_FLOAT_EQ(c.rope_freq_factors.front(), 1.0f);  // wavelength 2*pi < 8192/4
  EXPECT_FLOAT_EQ(c.rope_freq_factors.back(), 8.0f);   // wavelength 2*pi*10000^(62/64) > 8192
  for (size_t i = 1; i < c.rope_freq_factors.size(); ++i)
    EXPECT_GE(c.rope_freq_factors[i], c.rope_freq_factors[i - 1]);
}

TEST(Weights, BindsEveryTensorWithItsShape) {
  const ModelFile f = fixture();
  Config c = config_from_metadata(f.metadata);
  const ModelWeights w = bind_llama_weights(f, c);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_FALSE(w.tied_embeddings);
  EXPECT_EQ(w.output->name, "output.weight");
  EXPECT_EQ(w.layers[1].wk->name, "blk.1.attn_k.weight");
  EXPECT_EQ(w.layers[0].attn_norm.size(), 256u);
  // The norm weights are 1 + 0.02 * N(0,1) (README): all near 1.
  for (float v : w.layers[0].ffn_norm) EXPECT_NEAR(v, 1.0f, 0.2f);
}

TEST(Weights, WrongShapeNamesTheTensorAndBothShapes) {
  ModelFile f = fixture();
  for (TensorInfo& t : f.tensors)
    if (t.name == "blk.1.attn_k.weight") t.shape = {256, 256};
  Config c = config_from_metadata(f.metadata);
  EXPECT_EQ(error_of([&] { bind_llama_weights(f, c); }),
            "blk.1.attn_k.weight: expected [256, 128], got [256, 256]");
}

TEST(Weights, MissingTensorIsNamed) {
  ModelFile f = fixture();
  std::erase_if(f.tensors, [](const TensorInfo& t) { return t.name == "blk.0.ffn_up.weight"; });
  Config c = config_from_metadata(f.metadata);
  EXPECT_NE(error_of([&] { bind_llama_weights(f, c); }).find("'blk.0.ffn_up.weight' is missing"),
            std::string::npos);
}

// block_count 1 over a 2-layer file loaded one layer and generated; the file's extra layer is an
// error naming the tensor and the key, as llama.cpp refuses it (tensors left unused).
TEST(Weights, LayersPastBlockCountAreAnError) {
  const ModelFile f = fixture();
  Metadata md = f.metadata;
  md.set("llama.block_count", Value::u32(1));
  Config c = config_from_metadata(md);
  EXPECT_EQ(error_of([&] { bind_llama_weights(f, c); }),
            f.path + ": metadata llama.block_count is 1 but tensor 'blk.1.attn_norm.weight' exists");
}

// GGUF integers narrowed to int are range-checked (a u64 context length wrapped before).
TEST(Config, NarrowedIntegersAreRangeChecked) {
  const ModelFile f = fixture();
  for (const char* key : {"llama.context_length", "llama.rope.scaling.original_context_length",
                          "llama.block_count"}) {
    Metadata md = f.metadata;
    md.set("llama.rope.scaling.type", Value::string("yarn"));
    md.set(key, Value::u64((uint64_t(1) << 32) + 300));
    const std::string e = error_of([&] { config_from_metadata(md); });
    EXPECT_NE(e.find(std::string("'") + key + "': value 4294967596 is out of range"), std::string::npos)
        << key << ": " << e;
  }
}

TEST(Weights, NoOutputTensorMeansTiedEmbeddings) {
  ModelFile f = fixture();
  std::erase_if(f.tensors, [](const TensorInfo& t) { return t.name == "output.weight"; });
  Config c = config_from_metadata(f.metadata);
  const ModelWeights w = bind_llama_weights(f, c);
  EXPECT_TRUE(w.tied_embeddings);
  EXPECT_EQ(w.output, w.token_embd);
}

TEST(Weights, RopeFreqsTensorBecomesTheFactors) {
  ModelFile f = fixture();
  std::vector<float> factors(32);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + float(i);
  TensorInfo t;
  t.name = "rope_freqs.weight";
  t.type = QuantType::F32;
  t.shape = {32};
  t.bytes = 32 * sizeof(float);
  t.data = reinterpret_cast<const uint8_t*>(factors.data());
  f.tensors.push_back(t);
  Config c = config_from_metadata(f.metadata);
  bind_llama_weights(f, c);
  EXPECT_EQ(c.rope_freq_factors, factors);
}

}  // namespace
}  // namespace jitllm
