// HF import: pydoc-llama's tokenizer.model must give the same tokenizer.ggml.* metadata as
// llama.cpp's convert_hf_to_gguf.py wrote into pydoc-llama.F32.gguf, and the ids transformers and
// llama.cpp give for its prompts. A byte-level BPE tokenizer.json (written here from the gpt-2
// vocab GGUF's tokens and merges) must reproduce the gpt-2 oracle vectors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/hf_tokenizer.h"
#include "vocab_cache.h"

namespace jitllm {
namespace {

using testing::oracle_path;
using testing::read_text;

TEST(HfTokenizer, SentencePieceMatchesLlamaCppConversion) {
  const Metadata hf = hf_tokenizer_metadata(oracle_path("pydoc-llama/hf"));
  const Metadata gguf = GgufFile::open(oracle_path("pydoc-llama/pydoc-llama.F32.gguf")).metadata();
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                          "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                          "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token"}) {
    ASSERT_TRUE(hf.has(key)) << key;
    const Value& a = hf.at(key);
    const Value& b = gguf.at(key);
    if (a.type() == ValueType::Array) {
      EXPECT_EQ(a.to_json(), b.to_json()) << key;
    } else if (a.is_integer()) {
      EXPECT_EQ(a.as_i64(), b.as_i64()) << key;
    } else {
      EXPECT_EQ(a.to_json(), b.to_json()) << key;
    }
  }
}

TEST(HfTokenizer, PydocPromptsMatchTransformersAndLlamaCpp) {
  const Tokenizer from_hf(hf_tokenizer_metadata(oracle_path("pydoc-llama/hf")));
  const Tokenizer from_gguf(
      GgufFile::open(oracle_path("pydoc-llama/pydoc-llama.F32.gguf")).metadata());
  const auto ref = nlohmann::json::parse(read_text(oracle_path("pydoc-llama/hf_reference.json")));
  ASSERT_EQ(ref["prompts"].size(), 4u);
  for (const auto& prompt : ref["prompts"]) {
    const std::string text = prompt["text"];
    const auto expected = prompt["ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(from_hf.encode(text, true), expected) << text;
    EXPECT_EQ(from_gguf.encode(text, true), expected) << text;
    EXPECT_EQ(from_hf.decode(expected, true), " " + text);
  }
  for (const char* name : {"function", "list", "module", "thread"}) {
    const auto run = nlohmann::json::parse(
        read_text(oracle_path(std::string("pydoc-llama/llamacpp/F32.") + name + ".json")));
    EXPECT_EQ(from_hf.encode(run["prompt"].get<std::string>(), true),
              run["prompt_ids"].get<std::vector<TokenId>>());
  }
}

// A temporary folder removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("jitllm-hf-test-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(HfTokenizer, ByteLevelBpeTokenizerJsonMatchesGpt2Vectors) {
  const Metadata gguf = testing::oracle_vocab_metadata("gpt-2");
  const auto tokens = gguf.at("tokenizer.ggml.tokens").as_string_vector();
  const auto types = gguf.at("tokenizer.ggml.token_type").as_i64_vector();
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == int64_t(TokenType::Control))
      added.push_back({{"id", i}, {"content", tokens[i]}, {"special", true}});
    else
      vocab[tokens[i]] = i;
  }
  nlohmann::json tok = {
      {"model", {{"type", "BPE"}, {"vocab", vocab},
                 {"merges", gguf.at("tokenizer.ggml.merges").as_string_vector()}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", added}};
  TempDir dir;
  std::ofstream(dir.path / "tokenizer.json") << tok.dump();
  std::ofstream(dir.path / "tokenizer_config.json")
      << R"({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})";
  const Metadata md = hf_tokenizer_metadata(dir.path.string());
  EXPECT_EQ(md.get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(md.get_i64("tokenizer.ggml.eos_token_id"), 50256);
  const Tokenizer t(md);
  const auto inputs = testing::oracle_inputs();
  std::istringstream out(read_text(oracle_path("tokenizer/ggml-vocab-gpt-2.gguf.out")));
  std::string line;
  for (const std::string& text : inputs) {
    ASSERT_TRUE(std::getline(out, line));
    std::istringstream ls(line);
    std::vector<TokenId> expected;
    for (TokenId id; ls >> id;) expected.push_back(id);
    EXPECT_EQ(t.encode(text, false), expected) << text;
  }
}

TEST(HfTokenizer, ClearErrors) {
  TempDir dir;
  EXPECT_THROW(hf_tokenizer_metadata(dir.path.string()), Error);  // nothing there
  std::ofstream(dir.path / "tokenizer.json") << "{not json";
  try {
    hf_tokenizer_metadata(dir.path.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
  std::ofstream(dir.path / "tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "x+"}}})";
  EXPECT_THROW(hf_tokenizer_metadata(dir.path.string()), Error);  // unknown pre-tokenizer
  EXPECT_THROW(sentencepiece_metadata((dir.path / "tokenizer.json").string()), Error);
}

// config.json's vocab_size out of range was ignored (the pieces' count used instead) while the
// converter stored it: an error naming the key and the file now.
TEST(HfTokenizer, VocabSizeOutOfRangeIsAnError) {
  TempDir dir;
  std::filesystem::copy_file(oracle_path("pydoc-llama/hf/tokenizer.model"), dir.path / "tokenizer.model");
  for (const char* bad : {"0", "-5", "4294967296", "18446744073709551615", "2048.5", "\"2048\""}) {
    std::ofstream(dir.path / "config.json") << "{\"vocab_size\": " << bad << "}";
    try {
      sentencepiece_metadata((dir.path / "tokenizer.model").string());
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("config.json: 'vocab_size' is"), std::string::npos) << e.what();
    }
  }
  std::ofstream(dir.path / "config.json") << R"({"vocab_size": 2100})";
  EXPECT_EQ(sentencepiece_metadata((dir.path / "tokenizer.model").string())
                .at("tokenizer.ggml.tokens").as_array().items.size(),
            2100u);
}

}  // namespace
}  // namespace jitllm
