// Grammar masks on real vocabularies (SentencePiece with byte fallback, byte-level BPE, Phi-3's
// SPM with added specials): the trie walk allows exactly the tokens that advance the grammar
// one by one, along JSON texts tokenized by the model's own tokenizer; control tokens never, end
// tokens only where the text is complete.
#include <gtest/gtest.h>

#include "app/grammar_vocabulary.h"
#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "io/gguf.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::app {
namespace {

using constrain::Matcher;

class GrammarVocabulary : public ::testing::TestWithParam<const char*> {};

TEST_P(GrammarVocabulary, MasksEqualTokenByTokenChecksAlongJsonTexts) {
  const GgufFile file =
      GgufFile::open(testing::oracle_path(std::string("tokenizer/ggml-vocab-") + GetParam() + ".gguf"));
  const Tokenizer tok(file.metadata());
  auto vocab = make_grammar_vocabulary(tok, tok.n_vocab());
  ASSERT_EQ(vocab->size(), tok.n_vocab());
  // SentencePiece writes a leading space before the first piece.
  const std::string gbnf = "root ::= \" \"? json-value\n" + constrain::json_value_rules();
  Matcher m(constrain::parse_gbnf(gbnf), vocab);
  const std::vector<std::string> texts = {
      R"({"name": "Zoë", "tags": ["a\"b", "\u00e9"], "n": -12.5e3, "ok": true, "x": null})",
      R"([1, 22, 333, {"k": "日本語 text"}, "emoji 🙂"])"};
  size_t steps = 0;
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::vector<TokenId> ids = tok.encode(text, false, false);
    Matcher::State s = m.start();
    for (size_t i = 0; i <= ids.size(); ++i) {
      const auto mask = m.mask(s);
      size_t allowed = 0;
      for (size_t t = 0; t < vocab->size(); ++t) {
        const bool in_mask = (mask[t >> 6] >> (t & 63)) & 1;
        const bool by_token = m.allows(s, int32_t(t));
        ASSERT_EQ(in_mask, by_token) << "token " << t << " '" << tok.piece(TokenId(t)) << "' at step " << i;
        allowed += in_mask;
        if (vocab->bytes(int32_t(t)).empty() && !vocab->is_end(int32_t(t))) ASSERT_FALSE(in_mask);
      }
      EXPECT_GT(allowed, 0u);
      for (int32_t e : vocab->end_tokens()) EXPECT_EQ(m.allows(s, e), m.accepting(s));
      if (i == ids.size()) break;
      ASSERT_TRUE(m.allows(s, ids[i])) << "the text's own token " << ids[i] << " '" << tok.piece(ids[i]) << "'";
      s = m.advance(s, ids[i]);
      ++steps;
    }
    EXPECT_TRUE(m.accepting(s));
  }
  EXPECT_GT(steps, 20u);
}

// A control token whose text is a tool-call marker is text to a grammar (a constrained output
// may choose it and its decoder writes it); any other control token stays out.
TEST(GrammarVocabularyMarkers, ToolCallMarkersAreTheOnlyControlTokensAllowed) {
  Metadata md = GgufFile::open(testing::oracle_path("tokenizer/ggml-vocab-gpt-2.gguf")).metadata();
  std::vector<std::string> tokens = md.at("tokenizer.ggml.tokens").as_string_vector();
  std::vector<int32_t> types(tokens.size(), 1);
  if (md.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> given = md.at("tokenizer.ggml.token_type").as_i64_vector();
    for (size_t i = 0; i < types.size(); ++i) types[i] = int32_t(given[i]);
  }
  const int32_t tag = int32_t(tokens.size()) - 2, other = int32_t(tokens.size()) - 3;
  tokens[size_t(tag)] = "<|python_tag|>";
  tokens[size_t(other)] = "<|start_header_id|>";
  types[size_t(tag)] = types[size_t(other)] = 3;  // CONTROL
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  const Tokenizer tok(md);
  EXPECT_EQ(rendered_control_tokens(tok, tok.n_vocab()), std::vector<int32_t>{tag});
  EXPECT_EQ(make_grammar_vocabulary(tok, tok.n_vocab())->bytes(tag), "");  // not for other grammars
  auto vocab = make_grammar_vocabulary(tok, tok.n_vocab(), /*tool_markers=*/true);
  EXPECT_EQ(vocab->bytes(tag), "<|python_tag|>");
  EXPECT_EQ(vocab->bytes(other), "");
  Matcher m(constrain::parse_gbnf(R"(root ::= "<|python_tag|>" "x")"), vocab);
  EXPECT_TRUE(m.allows(m.start(), tag));
  EXPECT_FALSE(m.allows(m.start(), other));
  // The decoder writes the marker and drops the other control token.
  StreamDecoder d(tok, std::vector<TokenId>{tag});
  EXPECT_EQ(d.push(tag) + d.push(other), "<|python_tag|>");
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GrammarVocabulary,
                         ::testing::Values("llama-spm", "gpt-2", "phi-3"));

}  // namespace
}  // namespace jitllm::app
