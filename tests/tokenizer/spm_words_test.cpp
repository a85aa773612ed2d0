// SPM's per-word fast path (spm.cpp): it may only run when the vocab has no token that a merge
// could build across a word start; otherwise the whole fragment is merged as one, like llama.cpp.
// Both paths are checked against ids we did not compute: llama.cpp's oracle outputs, and a tiny
// vocab whose answer follows by hand from SentencePiece's merge rule.
#include <gtest/gtest.h>

#include <sstream>

#include "tokenizer/algorithms.h"
#include "vocab_cache.h"

namespace jitllm {
namespace {

TEST(SpmWords, InnerWordStartDetection) {
  EXPECT_FALSE(spm_has_inner_word_start("\xE2\x96\x81the"));
  EXPECT_FALSE(spm_has_inner_word_start("\xE2\x96\x81\xE2\x96\x81\xE2\x96\x81"));
  EXPECT_FALSE(spm_has_inner_word_start("ab"));
  EXPECT_TRUE(spm_has_inner_word_start("a\xE2\x96\x81"));
  EXPECT_TRUE(spm_has_inner_word_start("\xE2\x96\x81" "a\xE2\x96\x81" "b"));
  // A 4-byte lead swallows the next three bytes as one symbol, so this holds no U+2581 symbol.
  EXPECT_FALSE(spm_has_inner_word_start("\xF0\xE2\x96\x81"));
}

// The oracle's llama-spm and phi-3 vocabs take the fast path (so the llama.cpp differential and
// oracle tests exercise it).
TEST(SpmWords, OracleVocabsAreWordIndependent) {
  EXPECT_TRUE(testing::oracle_tokenizer("llama-spm").vocab().spm_words_independent);
  EXPECT_TRUE(testing::oracle_tokenizer("phi-3").vocab().spm_words_independent);
}

// The same vocab plus one unreachable token with an inner word start takes the whole-fragment
// path and must still give llama.cpp's ids for every oracle input.
TEST(SpmWords, WholeFragmentPathMatchesOracle) {
  Metadata md = testing::oracle_vocab_metadata("llama-spm");
  std::vector<std::string> tokens = md.at("tokenizer.ggml.tokens").as_string_vector();
  std::vector<float> scores = md.at("tokenizer.ggml.scores").as_f32_vector();
  std::vector<int64_t> types64 = md.at("tokenizer.ggml.token_type").as_i64_vector();
  tokens.push_back("\xE2\x80\xA1\xE2\x96\x81\xE2\x80\xA1");  // "‡▁‡": "‡▁" is no token
  scores.push_back(-1e9f);
  types64.push_back(1);
  std::vector<int32_t> types(types64.begin(), types64.end());
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.scores", Value::f32_array(scores));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  const Tokenizer tok(md);
  ASSERT_FALSE(tok.vocab().spm_words_independent);

  const auto inputs = testing::oracle_inputs();
  std::istringstream out(testing::read_text(
      testing::oracle_path("tokenizer/ggml-vocab-llama-spm.gguf.out")));
  ASSERT_GE(inputs.size(), 40u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string line;
    ASSERT_TRUE(std::getline(out, line)) << "oracle .out ends at line " << i;
    std::istringstream ls(line);
    std::vector<TokenId> expected;
    for (long long id; ls >> id;) expected.push_back(TokenId(id));
    EXPECT_EQ(tok.encode(inputs[i], false, false), expected) << "input " << i;
  }
}

// "a b" -> "▁a▁b": symbols ▁ a ▁ b; only "a▁" is a token, merged first; then "a▁b" is; nothing
// joins "▁" with "a▁b". So [▁, a▁b] = [3, 7]. Cutting at the word start would give [3, 4, 3, 5].
TEST(SpmWords, MergeAcrossWordStartIsKept) {
  Metadata md;
  md.set("tokenizer.ggml.model", Value::string("llama"));
  md.set("tokenizer.ggml.tokens", Value::string_array({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a",
                                                       "b", "a\xE2\x96\x81", "a\xE2\x96\x81" "b"}));
  md.set("tokenizer.ggml.scores", Value::f32_array({0, 0, 0, 0, 0, 0, -1, -2}));
  md.set("tokenizer.ggml.token_type", Value::i32_array({2, 3, 3, 1, 1, 1, 1, 1}));
  md.set("tokenizer.ggml.add_space_prefix", Value::boolean(true));
  const Tokenizer tok(md);
  EXPECT_FALSE(tok.vocab().spm_words_independent);
  EXPECT_EQ(tok.encode("a b", false, false), (std::vector<TokenId>{3, 7}));
}

}  // namespace
}  // namespace jitllm
