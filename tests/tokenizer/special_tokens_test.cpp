// Special tokens: control tokens come from text only with parse_special, user-defined ones always,
// LSTRIP/RSTRIP eat spaces, BOS/EOS/SEP follow the vocabulary's add_* flags. Expected ids are
// built from the oracle vectors (llama.cpp/HF ids for the plain text around the special token)
// and from the vocabulary's own token texts.
#include <gtest/gtest.h>

#include "vocab_cache.h"

namespace jitllm {
namespace {

using testing::oracle_tokenizer;

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SpecialTokens, SpmControlTokensOnlyWithParseSpecial) {
  const Tokenizer& tok = oracle_tokenizer("llama-spm");
  // Oracle: "Hello world" -> 15043 3186 (test 11 of the common input).
  const std::vector<TokenId> hello = {15043, 3186};
  ASSERT_EQ(tok.encode("Hello world", false), hello);
  // After a special token, SPM starts the next fragment with the dummy space again.
  EXPECT_EQ(tok.encode("<s>Hello world", false, true), concat({1}, hello));
  EXPECT_EQ(tok.encode("Hello world</s>", false, true), concat(hello, {2}));
  // Without parse_special "<s>" is plain text: never id 1.
  const auto plain = tok.encode("<s>Hello world", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_GT(plain.size(), 3u);
  // add_special adds BOS (add_bos_token = true) and no EOS (add_eos_token = false).
  EXPECT_EQ(tok.encode("Hello world", true), concat({1}, hello));
  EXPECT_EQ(tok.encode("", true), std::vector<TokenId>{1});
  EXPECT_TRUE(tok.encode("", false).empty());
}

TEST(SpecialTokens, BpeControlTokenAndNoBos) {
  const Tokenizer& tok = oracle_tokenizer("gpt-2");
  const TokenId eot = tok.vocab().find("<|endoftext|>");
  ASSERT_EQ(eot, 50256);
  // Oracle (gpt-2 .out, test 11): "Hello world" -> 15496 995.
  const std::vector<TokenId> hello = {15496, 995};
  ASSERT_EQ(tok.encode("Hello world", false), hello);
  EXPECT_EQ(tok.encode("Hello world<|endoftext|>", false, true), concat(hello, {eot}));
  const auto plain = tok.encode("Hello world<|endoftext|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), eot), 0);
  // gpt-2 has no add_bos_token key: llama.cpp's BPE default is no BOS.
  EXPECT_EQ(tok.encode("Hello world", true), hello);
}

TEST(SpecialTokens, UserDefinedTokensAlwaysMatch) {
  // MPT's vocabulary has user-defined whitespace-run tokens ("  " ... 24 spaces).
  const Tokenizer& tok = oracle_tokenizer("mpt");
  const std::string spaces(24, ' ');
  const TokenId id = tok.vocab().find(spaces);
  ASSERT_NE(id, kNoToken);
  ASSERT_TRUE(tok.vocab().tokens[size_t(id)].attr & kAttrUserDefined);
  EXPECT_EQ(tok.encode(spaces, false, false), std::vector<TokenId>{id});
  // Longest first: 25 spaces = the 24-space token + the single space.
  const auto ids = tok.encode(spaces + " ", false, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), id);
}

TEST(SpecialTokens, Phi3RstripEatsSpacesAfterEos) {
  // Phi-3's "</s>" is user-defined in the file, made CONTROL by llama.cpp's end-of-generation
  // texts, and RSTRIP by its per-model rule.
  const Tokenizer& tok = oracle_tokenizer("phi-3");
  const TokenId eos_text = tok.vocab().find("</s>");
  ASSERT_NE(eos_text, kNoToken);
  EXPECT_TRUE(tok.vocab().tokens[size_t(eos_text)].attr & kAttrRstrip);
  EXPECT_TRUE(tok.vocab().tokens[size_t(eos_text)].attr & kAttrControl);
  const auto a = tok.encode("Hello", false);
  const auto b = tok.encode("world", false);
  EXPECT_EQ(tok.encode("Hello</s>   world", false, true), concat(concat(a, {eos_text}), b));
  const auto plain = tok.encode("Hello</s>   world", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), eos_text), 0);
}

TEST(SpecialTokens, WordPieceAddsClsAndSep) {
  const Tokenizer& tok = oracle_tokenizer("bert-bge");
  // Oracle (bert-bge .out, test 11): "Hello world" -> 7592 2088.
  EXPECT_EQ(tok.encode("Hello world", true), (std::vector<TokenId>{101, 7592, 2088, 102}));
  EXPECT_EQ(tok.encode("[CLS]Hello world", false, true), (std::vector<TokenId>{101, 7592, 2088}));
}

TEST(SpecialTokens, EndOfGenerationSet) {
  const Tokenizer& spm = oracle_tokenizer("llama-spm");
  EXPECT_TRUE(spm.vocab().is_eog(2));
  EXPECT_FALSE(spm.vocab().is_eog(1));
  const Tokenizer& phi3 = oracle_tokenizer("phi-3");
  EXPECT_TRUE(phi3.vocab().is_eog(phi3.vocab().find("<|end|>")));
  EXPECT_TRUE(phi3.vocab().is_eog(phi3.vocab().find("<|endoftext|>")));
}

}  // namespace
}  // namespace jitllm
