// Unigram (T5-style) tokenizer against libsentencepiece itself: a unigram model is trained here
// with SentencePiece's trainer (NFKC normalization, so the precompiled charsmap is exercised) on
// the oracle's README texts, converted to "t5" metadata, and our ids must equal
// SentencePieceProcessor::Encode's for prose lines, NFKC-sensitive text, runs of spaces and
// characters the model has never seen.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/unicode.h"
#include "vocab_cache.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

struct TrainedModel {
  fs::path dir;
  std::string model_path;
  std::vector<std::string> lines;
  TrainedModel() {
    dir = fs::temp_directory_path() / ("jitllm-ugm-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string corpus;
    for (const char* f : {"README.md", "tokenizer/README.md", "pydoc-llama/README.md",
                          "templates/README.md"})
      corpus += testing::read_text(testing::oracle_path(f)) + "\n";
    std::istringstream in(corpus);
    for (std::string line; std::getline(in, line);)
      if (line.size() > 3) lines.push_back(line);
    std::ofstream(dir / "corpus.txt") << corpus;
    model_path = (dir / "ugm.model").string();
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir / "corpus.txt").string() + " --model_prefix=" + (dir / "ugm").string() +
        " --model_type=unigram --vocab_size=600 --character_coverage=0.9995"
        " --normalization_rule_name=nmt_nfkc --minloglevel=2 --num_threads=1");
    if (!status.ok()) throw std::runtime_error("sentencepiece training failed: " + status.ToString());
  }
  ~TrainedModel() { fs::remove_all(dir); }
};

const TrainedModel& trained() {
  static TrainedModel model;
  return model;
}

TEST(Unigram, MatchesSentencePieceEncode) {
  const TrainedModel& m = trained();
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(m.model_path).ok());
  const Metadata md = sentencepiece_t5_metadata(m.model_path);
  ASSERT_EQ(md.get_string("tokenizer.ggml.model"), "t5");
  ASSERT_TRUE(md.has("tokenizer.ggml.precompiled_charsmap"));
  const Tokenizer tok(md);
  ASSERT_EQ(tok.vocab().type, VocabType::Ugm);

  std::vector<std::string> texts(m.lines.begin(), m.lines.end());
  // NFKC folds these (fullwidth letters, ligatures, compatibility digits, no-break space).
  texts.push_back("\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3 \xEF\xAC\x81le \xE2\x91\xA0\xC2\xB2 a\xC2\xA0" "b");
  texts.push_back("   leading and   inner   spaces   ");
  texts.push_back("unseen: \xE0\xA4\xA8\xE0\xA4\xAE \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99 Z\xCC\x81");
  texts.push_back("tabs\tand\nnewlines\r\n");
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string s;
    for (int k = 0, n = 1 + int(rng() % 30); k < n; ++k) {
      static const uint32_t pool[] = {'a', 'e', 't', ' ', ' ', '.', 'T', '7', 0xE9, 0x301,
                                      0xFF21, 0x2460, 0x4E2D, 0x1F999, '\t', 0xA0, 0xFB01};
      unicode::append_utf8(s, pool[rng() % std::size(pool)]);
    }
    texts.push_back(s);
  }
  int failed = 0;
  for (const std::string& text : texts) {
    std::vector<int> want;
    ASSERT_TRUE(sp.Encode(text, &want).ok());
    const std::vector<TokenId> got = tok.encode(text, false);
    if (std::vector<TokenId>(want.begin(), want.end()) != got && ++failed <= 10) {
      std::string w, g;
      for (int id : want) w += " " + std::to_string(id);
      for (TokenId id : got) g += " " + std::to_string(id);
      ADD_FAILURE() << "'" << text << "'\n  sentencepiece:" << w << "\n  ours:         " << g;
    }
  }
  EXPECT_EQ(failed, 0) << failed << " of " << texts.size() << " differ";
  // T5 conventions: EOS appended, no BOS; decode drops the dummy-prefix space.
  const auto with_eos = tok.encode("Hello world", true);
  ASSERT_FALSE(with_eos.empty());
  EXPECT_EQ(with_eos.back(), tok.vocab().eos);
  EXPECT_EQ(tok.decode(tok.encode("Hello world", false)), "Hello world");
}

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) out += abc[(acc >> (bits -= 6)) & 63];
  }
  if (bits > 0) out += abc[(acc << (6 - bits)) & 63];
  while (out.size() % 4) out += '=';
  return out;
}

TEST(Unigram, HfTokenizerJsonMatchesSentencePiece) {
  // The trained model written as a T5-style tokenizer.json (Precompiled normalizer,
  // WhitespaceSplit + Metaspace), imported back: ids must equal SentencePiece's.
  const TrainedModel& m = trained();
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(m.model_path).ok());
  const Metadata from_model = sentencepiece_t5_metadata(m.model_path);
  std::string charsmap;
  for (int64_t b : from_model.at("tokenizer.ggml.precompiled_charsmap").as_i64_vector())
    charsmap += char(uint8_t(b));
  nlohmann::json vocab = nlohmann::json::array(), added = nlohmann::json::array();
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    vocab.push_back({sp.IdToPiece(id), sp.GetScore(id)});
    if (sp.IsControl(id)) added.push_back({{"id", id}, {"content", sp.IdToPiece(id)}, {"special", true}});
  }
  const nlohmann::json tok = {
      {"model", {{"type", "Unigram"}, {"unk_id", sp.unk_id()}, {"vocab", vocab}}},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Precompiled"},
                                                              {"precompiled_charsmap", base64(charsmap)}}}}}},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}},
                                                                  {{"type", "Metaspace"}, {"replacement", "\u2581"},
                                                                   {"prepend_scheme", "always"}}}}}},
      {"added_tokens", added}};
  const fs::path dir = m.dir / "hf";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  const Tokenizer t(hf_tokenizer_metadata(dir.string()));
  ASSERT_EQ(t.vocab().type, VocabType::Ugm);
  int failed = 0;
  for (const std::string& text : m.lines) {
    std::vector<int> want;
    ASSERT_TRUE(sp.Encode(text + "   two  spaces ", &want).ok());
    if (std::vector<TokenId>(want.begin(), want.end()) != t.encode(text + "   two  spaces ", false))
      ++failed;
  }
  EXPECT_EQ(failed, 0);
}

TEST(Unigram, CorruptCharsmapIsAnError) {
  Metadata md = sentencepiece_t5_metadata(trained().model_path);
  md.set("tokenizer.ggml.precompiled_charsmap",
         Value::array(ValueType::U8, {Value::u8(0xFF), Value::u8(0xFF), Value::u8(0), Value::u8(0),
                                      Value::u8(1)}));
  EXPECT_THROW(Tokenizer{md}, Error);
}

}  // namespace
}  // namespace jitllm
