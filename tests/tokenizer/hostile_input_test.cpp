// Hostile input: malformed tokenizer metadata gives errors naming the key; invalid UTF-8, NUL
// bytes, lone surrogates and very long runs never crash, every id stays in range, and time stays
// linear-ish (the long-run cases must finish within the test's time).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "vocab_cache.h"

namespace jitllm {
namespace {

using testing::oracle_tokenizer;
using testing::oracle_vocab_metadata;

std::string error_of(const Metadata& md) {
  try {
    Tokenizer t(md);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HostileMetadata, ErrorsNameTheKey) {
  Metadata md = oracle_vocab_metadata("llama-spm");
  {
    Metadata m = md;
    m.erase("tokenizer.ggml.model");
    EXPECT_NE(error_of(m).find("tokenizer.ggml.model"), std::string::npos) << error_of(m);
  }
  {
    Metadata m = md;
    m.set("tokenizer.ggml.model", Value::string("wordpiece9000"));
    EXPECT_NE(error_of(m).find("wordpiece9000"), std::string::npos);
  }
  {
    Metadata m = md;
    m.erase("tokenizer.ggml.tokens");
    EXPECT_NE(error_of(m).find("tokenizer.ggml.tokens"), std::string::npos);
  }
  {
    Metadata m = md;
    m.set("tokenizer.ggml.scores", Value::f32_array({1.0f, 2.0f}));
    EXPECT_NE(error_of(m).find("tokenizer.ggml.scores"), std::string::npos) << error_of(m);
  }
  {
    Metadata m = md;
    m.set("tokenizer.ggml.token_type", Value::string_array({"a"}));
    EXPECT_NE(error_of(m).find("tokenizer.ggml.token_type"), std::string::npos) << error_of(m);
  }
  {
    Metadata m = md;
    m.set("tokenizer.ggml.tokens", Value::string("not an array"));
    EXPECT_NE(error_of(m).find("tokenizer.ggml.tokens"), std::string::npos) << error_of(m);
  }
  {
    Metadata m = oracle_vocab_metadata("gpt-2");
    m.set("tokenizer.ggml.pre", Value::string("no-such-pre"));
    EXPECT_NE(error_of(m).find("no-such-pre"), std::string::npos);
    m = oracle_vocab_metadata("gpt-2");
    m.erase("tokenizer.ggml.merges");
    EXPECT_NE(error_of(m).find("tokenizer.ggml.merges"), std::string::npos);
  }
  {
    // An out-of-range special id keeps the default, as llama.cpp does.
    Metadata m = md;
    m.set("tokenizer.ggml.bos_token_id", Value::u32(1u << 30));
    EXPECT_EQ(Tokenizer(m).vocab().bos, 1);
  }
}

TEST(HostileText, RandomBytesNeverCrashAndIdsStayInRange) {
  std::mt19937 rng(2024);
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-llm", "falcon", "bert-bge", "mpt"}) {
    const Tokenizer& tok = oracle_tokenizer(name);
    for (int i = 0; i < 100; ++i) {
      std::string bytes(rng() % 64, '\0');
      for (char& c : bytes) c = char(rng() % 256);
      if (i % 3 == 0) bytes += "\xED\xA0\x80\xF4\x90\x80\x80\xC0\x80";  // surrogate, >U+10FFFF, overlong
      for (bool special : {false, true}) {
        const auto ids = tok.encode(bytes, true, special);
        for (TokenId id : ids) ASSERT_TRUE(id >= 0 && size_t(id) < tok.n_vocab()) << name;
        const std::string text = tok.decode(ids, false, special);
        (void)text;
        StreamDecoder stream(tok, special);
        for (TokenId id : ids) stream.push(id);
        stream.finish();
      }
    }
  }
}

TEST(HostileText, LongRunsFinishQuickly) {
  const std::vector<std::string> inputs = {
      std::string(256 * 1024, ' '), std::string(256 * 1024, 'a'), std::string(128 * 1024, '\n'),
      [] {
        std::string s;
        while (s.size() < 256 * 1024) s += "\xF0\x9F\xA6\x99";  // 🦙 x 65536
        return s;
      }(),
      std::string(64 * 1024, '3')};
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-coder", "bert-bge"}) {
    const Tokenizer& tok = oracle_tokenizer(name);
    for (const std::string& text : inputs) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto ids = tok.encode(text, false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const bool blank = text.find_first_not_of(" \n") == std::string::npos;
      if (!(blank && tok.vocab().type == VocabType::Wpm)) {
        EXPECT_FALSE(ids.empty()) << name;
      }
      EXPECT_LT(s, 5.0) << name << ": " << text.size() << " bytes took " << s << " s";
    }
  }
}

TEST(HostileText, PreTokenizerCoversTheInputExactly) {
  // The split pieces concatenate back to the input for every regex set (no byte lost or added).
  std::mt19937 rng(5);
  const std::vector<std::string> names = known_pre_tokenizers();
  EXPECT_GE(names.size(), 60u);
  for (const std::string& pre : names) {
    const PreTokenizer p(pre_tokenizer_spec(pre).regexes);
    for (const std::string& text : testing::oracle_inputs()) {
      std::string joined;
      for (std::string_view piece : p.split(text)) {
        EXPECT_FALSE(piece.empty()) << pre;
        joined += piece;
      }
      EXPECT_EQ(joined, text) << pre;
    }
  }
}

}  // namespace
}  // namespace jitllm
