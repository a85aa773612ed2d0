// Embeddings and reranking against transformers 5.17: tiny random BERTs made with transformers'
// own classes and their WordPiece tokenizers (scripts/fixtures/tiny_bert.py; committed in
// tests/model/data/bert-tiny and bert-rerank-tiny), loaded from their HF folders: the token ids
// equal HF's tokenizer's, the hidden states' mean and CLS row within float16-weight rounding of
// transformers', the cross-encoder's scores likewise; the same vectors whether inputs share a
// step, come alone or (causal models) in chunks; and the refusals (no pooling, no head,
// generation on an encoder).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "app/embeddings.h"
#include "app/loaded_model.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::app {
namespace {

nlohmann::json reference(const std::string& fixture) {
  return nlohmann::json::parse(testing::read_text(testing::family_fixture_dir(fixture) + "/reference.json"));
}

LoadedModel load(const std::string& fixture, const std::string& kernels, int64_t n_batch = 256) {
  LoadOptions o;
  o.path = testing::family_fixture_dir(fixture);
  o.engine.cpu_kernels = kernels;
  o.engine.n_batch = n_batch;
  return LoadedModel(o);
}

// Largest |a - b| over the largest |b|.
float relative_diff(const float* a, const std::vector<float>& b) {
  float diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / scale;
}

// The weights are float16 in both; jitllm rounds activations to float16 before a float16
// weight's dot product (ggml's F16 vec_dot), transformers stays in float32.
constexpr float kTolerance = 2e-3f;  // of the largest value (docs/families.md has what it is)

class BertOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(BertOracle, TokenIdsMatchTransformersTokenizer) {
  LoadedModel m = load("bert", GetParam());
  for (const auto& t : reference("bert")["texts"])
    EXPECT_EQ(embedding_tokens(m, t["text"]), t["ids"].get<std::vector<int32_t>>()) << t["text"];
}

TEST_P(BertOracle, PooledHiddenStatesMatchTransformers) {
  // A batch of 32 tokens: the 74-token text runs whole in a step of its own (bidirectional), the
  // others share steps.
  for (const int64_t n_batch : {int64_t(256), int64_t(32)}) {
    LoadedModel m = load("bert", GetParam(), n_batch);
    Engine& e = m.engine();
    EXPECT_EQ(e.config().arch, "bert");
    EXPECT_FALSE(e.config().causal);
    EXPECT_EQ(e.config().pooling, Pooling::Cls);  // from 1_Pooling/config.json
    const nlohmann::json ref = reference("bert");
    std::vector<std::vector<int32_t>> inputs;
    for (const auto& t : ref["texts"]) inputs.push_back(t["ids"].get<std::vector<int32_t>>());
    const size_t d = size_t(e.config().n_embd);
    const std::vector<float> mean = e.embed(inputs, Pooling::Mean, false);
    const std::vector<float> cls = e.embed(inputs, Pooling::Cls, false);
    const std::vector<float> unit = e.embed(inputs, embedding_pooling(e, Pooling::Unspecified), true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& t = ref["texts"][i];
      EXPECT_LT(relative_diff(&mean[i * d], t["mean"]), kTolerance) << "mean of text " << i;
      EXPECT_LT(relative_diff(&cls[i * d], t["cls"]), kTolerance) << "cls of text " << i;
      EXPECT_LT(relative_diff(&unit[i * d], t["embedding"]), kTolerance) << "embedding of text " << i;
      // Alone, the same vector as in company (rows of other inputs are never attended), up to
      // the attention path a step's row count picks (llama.cpp's: Q in f16 below 64 rows).
      const std::vector<float> alone = e.embed({&inputs[i], 1}, Pooling::Mean, false);
      EXPECT_LT(relative_diff(alone.data(), std::vector<float>(mean.begin() + ptrdiff_t(i * d),
                                                               mean.begin() + ptrdiff_t((i + 1) * d))),
                2e-4f) << "text " << i << " alone";
    }
  }
}

TEST_P(BertOracle, RerankScoresMatchTransformers) {
  LoadedModel m = load("bert-rerank", GetParam());
  Engine& e = m.engine();
  EXPECT_EQ(e.config().pooling, Pooling::Rank);
  ASSERT_EQ(e.embedding_width(Pooling::Rank), 1);
  const nlohmann::json ref = reference("bert-rerank");
  EXPECT_EQ(e.token_types(), 1);  // one type: the pair's tokens are all of type 0
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& p : ref["pairs"]) {
    const RerankInput in = rerank_input(m, p["query"], p["document"]);
    EXPECT_EQ(in.ids, p["ids"].get<std::vector<int32_t>>());
    EXPECT_TRUE(in.types.empty());
    inputs.push_back(in.ids);
  }
  const std::vector<float> scores = e.embed(inputs, Pooling::Rank, false);
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_NEAR(scores[i], ref["pairs"][i]["score"].get<float>(), 1e-3f) << "pair " << i;
  // Its pooling is rank: it does not embed.
  EXPECT_THROW(embedding_pooling(e, Pooling::Unspecified), Error);
}

// A cross-encoder with two token types (every BERT cross-encoder users bring): rerank_input types
// "[CLS] q [SEP]" 0 and "d [SEP]" 1 as transformers' BERT pair convention does, and the scores
// follow transformers' with those types.
TEST_P(BertOracle, RerankWithTwoTypesMatchesTransformers) {
  LoadedModel m = load("bert-rerank2", GetParam());
  Engine& e = m.engine();
  ASSERT_EQ(e.token_types(), 2);
  const nlohmann::json ref = reference("bert-rerank2");
  std::vector<std::vector<int32_t>> inputs, types;
  for (const auto& p : ref["pairs"]) {
    const RerankInput in = rerank_input(m, p["query"], p["document"]);
    EXPECT_EQ(in.ids, p["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(in.types, p["types"].get<std::vector<int32_t>>());
    inputs.push_back(in.ids);
    types.push_back(in.types);
  }
  const std::vector<float> scores = e.embed(inputs, Pooling::Rank, false, types);
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_NEAR(scores[i], ref["pairs"][i]["score"].get<float>(), 1e-3f) << "pair " << i;
}

INSTANTIATE_TEST_SUITE_P(Kernels, BertOracle, ::testing::Values("reference", "jit"));

// Token types (bert-tiny has two): type 0 given explicitly is the default bit for bit; type 1
// (a cross-encoder's document) is its own row of the table, so the vectors move; mixed types
// move only where they differ; a type past the table is refused.
TEST(Embeddings, TokenTypesSelectTheirRows) {
  LoadedModel m = load("bert", "reference");
  Engine& e = m.engine();
  ASSERT_EQ(e.token_types(), 2);
  const std::vector<std::vector<int32_t>> in{embedding_tokens(m, "The cat sat on the mat.")};
  const size_t n = in[0].size();
  const std::vector<std::vector<int32_t>> zeros{std::vector<int32_t>(n, 0)}, ones{std::vector<int32_t>(n, 1)};
  std::vector<std::vector<int32_t>> mixed{std::vector<int32_t>(n, 0)};
  mixed[0].back() = 1;
  const std::vector<float> plain = e.embed(in, Pooling::Mean, false);
  EXPECT_EQ(e.embed(in, Pooling::Mean, false, zeros), plain);
  const std::vector<float> typed = e.embed(in, Pooling::Mean, false, ones);
  const std::vector<float> part = e.embed(in, Pooling::Mean, false, mixed);
  float moved = 0, moved_part = 0;
  for (size_t k = 0; k < plain.size(); ++k) {
    moved = std::max(moved, std::fabs(typed[k] - plain[k]));
    moved_part = std::max(moved_part, std::fabs(part[k] - plain[k]));
  }
  EXPECT_GT(moved, 1e-2f);
  EXPECT_GT(moved_part, 1e-4f);
  EXPECT_LT(moved_part, moved);
  const std::vector<std::vector<int32_t>> bad{std::vector<int32_t>(n, 2)};
  EXPECT_THROW(e.embed(in, Pooling::Mean, false, bad), Error);
  const std::vector<std::vector<int32_t>> short_types{std::vector<int32_t>(n - 1, 0)};
  EXPECT_THROW(e.embed(in, Pooling::Mean, false, short_types), Error);
}

TEST(Embeddings, AnEncoderRefusesLogitsAndRankWithoutAHead) {
  LoadedModel m = load("bert", "jit");
  Engine& e = m.engine();
  auto s = e.new_session();
  const std::vector<int32_t> ids{2, 40, 3};
  try {
    e.prefill(*s, ids, false);
    FAIL() << "an encoder gave logits";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("encoder"), std::string::npos) << err.what();
  }
  EXPECT_THROW(e.embedding_width(Pooling::Rank), Error);
  EXPECT_THROW(rerank_input(m, "q", "d"), Error);
  EXPECT_THROW(e.embed({&ids, 1}, Pooling::None, true), Error);
}

TEST(Embeddings, ADecoderPoolsTheSameInOneStepAloneAndInChunks) {
  // pydoc-llama names no pooling: embeddings need one chosen.
  const std::string path = testing::oracle_path("pydoc-llama/pydoc-llama.F32.gguf");
  LoadOptions o;
  o.path = path;
  o.engine.cpu_kernels = "reference";
  LoadedModel whole(o);
  o.engine.n_batch = 7;  // the 20-token input in three chunks
  LoadedModel chunked(o);
  EXPECT_THROW(embedding_pooling(whole.engine(), Pooling::Unspecified), Error);
  std::vector<std::vector<int32_t>> inputs{embedding_tokens(whole, "def open(path): return a file object"),
                                           embedding_tokens(whole, "x")};
  while (inputs[0].size() < 20) inputs[0].push_back(inputs[0][1]);
  for (const Pooling p : {Pooling::Mean, Pooling::Last, Pooling::Cls}) {
    const std::vector<float> a = whole.engine().embed(inputs, p, true);
    const std::vector<float> b = chunked.engine().embed(inputs, p, true);
    ASSERT_EQ(a.size(), b.size());
    double norm = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_NEAR(a[k], b[k], 2e-5f) << pooling_name(p) << " " << k;
      if (k < a.size() / 2) norm += double(a[k]) * a[k];
    }
    EXPECT_NEAR(norm, 1.0, 1e-5) << pooling_name(p);
  }
  // Mean of two different inputs differs (no rows of one leak into the other).
  const std::vector<float> m = whole.engine().embed(inputs, Pooling::Mean, true);
  const size_t d = m.size() / 2;
  float diff = 0;
  for (size_t k = 0; k < d; ++k) diff = std::max(diff, std::fabs(m[k] - m[d + k]));
  EXPECT_GT(diff, 1e-3f);
}

}  // namespace
}  // namespace jitllm::app
