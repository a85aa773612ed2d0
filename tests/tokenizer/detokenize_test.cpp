// Detokenization and streaming: decode(encode(text)) == text where the vocabulary can represent
// the text (SPM byte fallback: any bytes; byte-level BPE without clean-up: any valid UTF-8),
// pieces of known tokens, BPE clean-up, and a stream decoder that never splits a character.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

#include "tokenizer/unicode.h"
#include "vocab_cache.h"

namespace jitllm {
namespace {

using testing::oracle_inputs;
using testing::oracle_tokenizer;

bool valid_utf8(const std::string& s) { return unicode::sanitize(s) == s; }

// Random text: ASCII, spaces/newlines, 2-, 3- and 4-byte characters (Cyrillic, CJK, emoji).
std::string random_utf8(std::mt19937& rng, size_t n_chars) {
  static const uint32_t ranges[][2] = {{0x20, 0x7E}, {0x20, 0x20}, {0x0A, 0x0A}, {0x09, 0x09},
                                       {0x400, 0x4FF}, {0x4E00, 0x9FFF}, {0x1F600, 0x1F64F},
                                       {0xE0, 0xFF}, {0x1780, 0x17FF}};
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    const auto& r = ranges[rng() % std::size(ranges)];
    unicode::append_utf8(s, r[0] + uint32_t(rng() % (r[1] - r[0] + 1)));
  }
  return s;
}

TEST(Detokenize, SpmRoundTripsOracleInputsAndRandomText) {
  const Tokenizer& tok = oracle_tokenizer("llama-spm");
  for (const std::string& text : oracle_inputs()) {
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
    // llama.cpp: cutting the BOS (remove_special) also keeps the dummy-prefix space.
    if (!text.empty()) {
      EXPECT_EQ(tok.decode(tok.encode(text, true), true), " " + text);
    }
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    const std::string text = random_utf8(rng, 1 + rng() % 40);
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
  }
}

TEST(Detokenize, SpmRoundTripsInvalidUtf8ThroughByteTokens) {
  const Tokenizer& tok = oracle_tokenizer("llama-spm");
  std::mt19937 rng(99);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(1 + rng() % 30, '\0');
    // No spaces: an escaped space ("▁", 3 bytes) right after a truncated lead byte is grouped
    // with it by the lead byte's length and comes back as raw bytes (as in llama.cpp).
    for (char& c : bytes) c = char(rng() % 256);
    for (char& c : bytes)
      if (c == ' ') c = 'x';
    EXPECT_EQ(tok.decode(tok.encode(bytes, false)), bytes);
  }
}

TEST(Detokenize, BpeWithoutCleanupRoundTrips) {
  // deepseek-llm and deepseek-coder turn clean_spaces off: decode is the exact inverse.
  for (const char* name : {"deepseek-llm", "deepseek-coder"}) {
    const Tokenizer& tok = oracle_tokenizer(name);
    ASSERT_FALSE(tok.vocab().clean_spaces);
    for (const std::string& text : oracle_inputs())
      EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << name;
    std::mt19937 rng(7);
    for (int i = 0; i < 100; ++i) {
      const std::string text = random_utf8(rng, 1 + rng() % 40);
      EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << name;
    }
  }
}

TEST(Detokenize, BpeInvalidUtf8BecomesReplacementCharacter) {
  const Tokenizer& tok = oracle_tokenizer("deepseek-llm");
  EXPECT_EQ(tok.decode(tok.encode("a\xFF" "b", false)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(tok.decode(tok.encode("\xE2\x82", false)), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Detokenize, Gpt2CleanUpSpaces) {
  // gpt-2 keeps HF's clean_up_tokenization_spaces: " ," " ." " 's" lose the space.
  const Tokenizer& tok = oracle_tokenizer("gpt-2");
  ASSERT_TRUE(tok.vocab().clean_spaces);
  EXPECT_EQ(tok.decode(tok.encode("Hello , world . It 's here", false)), "Hello, world. It's here");
  EXPECT_EQ(tok.decode(tok.encode("Hello world!", false)), "Hello world!");
}

TEST(Detokenize, ControlTokensRenderOnlyWhenAsked) {
  const Tokenizer& tok = oracle_tokenizer("llama-spm");
  const std::vector<TokenId> ids = tok.encode("Hello", true);  // [1, ...]
  ASSERT_EQ(ids.front(), 1);
  // The leading-space removal applies to the first token only, here the (silent) BOS.
  EXPECT_EQ(tok.decode(ids, false, false), " Hello");
  EXPECT_EQ(tok.decode(ids, false, true), "<s> Hello");
  EXPECT_EQ(tok.decode(ids, true, true), " Hello");  // llama.cpp keeps the space once BOS is cut
  EXPECT_EQ(tok.decode({ids.begin() + 1, ids.end()}), "Hello");
  EXPECT_EQ(tok.piece(1, false), "");
  EXPECT_EQ(tok.piece(1, true), "<s>");
  EXPECT_EQ(tok.piece(3 + 0x41), "A");  // byte token <0x41>
  EXPECT_EQ(tok.piece(tok.vocab().find("\xE2\x96\x81Hello")), " Hello");
}

TEST(Detokenize, OutOfRangeIdsAreErrors) {
  const Tokenizer& tok = oracle_tokenizer("gpt-2");
  EXPECT_THROW(tok.decode({0, 50257}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
  EXPECT_THROW(tok.piece(1 << 30), Error);
}

TEST(StreamDecoder, NeverSplitsACharacterAndMatchesDecode) {
  for (const char* name : {"llama-spm", "deepseek-llm"}) {
    const Tokenizer& tok = oracle_tokenizer(name);
    std::mt19937 rng(42);
    for (int i = 0; i < 100; ++i) {
      const std::string text = random_utf8(rng, 1 + rng() % 30);
      const auto ids = tok.encode(text, false);
      StreamDecoder stream(tok);
      std::string joined;
      for (TokenId id : ids) {
        const std::string part = stream.push(id);
        EXPECT_TRUE(valid_utf8(part)) << name;
        joined += part;
      }
      joined += stream.finish();
      EXPECT_EQ(joined, text) << name;
    }
  }
}

TEST(StreamDecoder, DanglingBytesBecomeOneReplacementCharacter) {
  const Tokenizer& tok = oracle_tokenizer("llama-spm");
  StreamDecoder stream(tok);
  // <0xE2> <0x82>: the first two bytes of "€"; nothing is emitted until finish().
  EXPECT_EQ(stream.push(3 + 0xE2), "");
  EXPECT_EQ(stream.push(3 + 0x82), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  std::string euro = stream.push(3 + 0xE2);
  euro += stream.push(3 + 0x82);
  EXPECT_EQ(euro, "");
  euro += stream.push(3 + 0xAC);
  EXPECT_EQ(euro, "\xE2\x82\xAC");
}

}  // namespace
}  // namespace jitllm
