// BERT's HF conversion (tests/model/data/bert-tiny and bert-rerank-tiny, written by transformers
// 5.17): the keys (bidirectional, LayerNorm epsilon, the pooling from the sentence-transformers
// 1_Pooling file or rank for a classifier), the tensor names (the pooler kept only for the
// classifier), the WordPiece vocabulary in llama.cpp's form ("\u2581" word starts, "##" dropped,
// [CLS] as BOS, [SEP] the separator), and the sentence-transformers setups whose vectors it
// cannot reproduce refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "convert/source.h"
#include "core/error.h"
#include "io/hf_folder.h"
#include "tokenizer/hf_tokenizer.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;
const std::string kData = std::string(JITLLM_SOURCE_DIR) + "/tests/model/data/";

SourceOptions with_tokenizer() {
  SourceOptions o;
  o.hf_tokenizer = [](const HfFolder& folder, Metadata& m) {
    const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
    for (const auto& [key, value] : tokenizer.entries()) m.set(key, value);
  };
  return o;
}

std::set<std::string> names(const ConvertSource& s) {
  std::set<std::string> out;
  for (const SourceTensor& t : s.tensors) out.insert(t.name);
  return out;
}

TEST(HfBert, EmbedderKeysTensorsAndVocabulary) {
  const ConvertSource s = open_hf_source(kData + "bert-tiny", with_tokenizer());
  const Metadata& m = s.metadata;
  EXPECT_EQ(m.architecture(), "bert");
  EXPECT_FALSE(m.get_bool("bert.attention.causal"));
  EXPECT_EQ(m.get_i64("bert.pooling_type"), 2);  // 1_Pooling/config.json: CLS
  EXPECT_EQ(m.get_i64("bert.embedding_length"), 96);
  EXPECT_EQ(m.get_i64("bert.context_length"), 128);
  const std::set<std::string> t = names(s);
  for (const char* n : {"token_embd.weight", "position_embd.weight", "token_types.weight",
                        "token_embd_norm.weight", "token_embd_norm.bias", "blk.1.attn_q.bias",
                        "blk.1.attn_output_norm.bias", "blk.1.ffn_up.bias", "blk.1.layer_output_norm.weight"})
    EXPECT_TRUE(t.count(n)) << n;
  EXPECT_FALSE(t.count("cls.weight"));  // no classifier: no pooler
  EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "bert");
  const std::vector<std::string> tokens = m.find("tokenizer.ggml.tokens")->as_string_vector();
  EXPECT_EQ(tokens[size_t(m.get_i64("tokenizer.ggml.bos_token_id"))], "[CLS]");
  EXPECT_EQ(tokens[size_t(m.get_i64("tokenizer.ggml.seperator_token_id"))], "[SEP]");
  EXPECT_EQ(tokens[size_t(m.get_i64("tokenizer.ggml.unknown_token_id"))], "[UNK]");
  bool word = false, piece = false;
  for (const std::string& tok : tokens) {
    word |= tok == "\xE2\x96\x81" "cat";
    piece |= tok == "ing";  // "##ing"
    EXPECT_FALSE(tok.starts_with("##")) << tok;
  }
  EXPECT_TRUE(word && piece);
}

TEST(HfBert, ClassifierKeepsThePoolerAsClsAndPoolsByRank) {
  const ConvertSource s = open_hf_source(kData + "bert-rerank-tiny", with_tokenizer());
  EXPECT_EQ(s.metadata.get_i64("bert.pooling_type"), 4);
  const std::set<std::string> t = names(s);
  for (const char* n : {"cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"})
    EXPECT_TRUE(t.count(n)) << n;
}

// A copy of bert-tiny whose sentence-transformers files say something else.
std::string variant(const std::string& pooling_json, const std::string& modules_json) {
  const fs::path dir = fs::temp_directory_path() / ("jitllm_hf_bert_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(kData + "bert-tiny", dir, fs::copy_options::recursive);
  std::ofstream(dir / "1_Pooling" / "config.json") << pooling_json;
  if (!modules_json.empty()) std::ofstream(dir / "modules.json") << modules_json;
  return dir.string();
}

std::string error_of(const std::string& dir) {
  try {
    open_hf_source(dir, with_tokenizer());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfBert, PoolingsItCannotReproduceAreRefused) {
  EXPECT_NE(error_of(variant(R"({"pooling_mode_max_tokens": true})", "")).find("pooling_mode_max_tokens"),
            std::string::npos);
  EXPECT_NE(error_of(variant(R"({"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true})", ""))
                .find("several pooling modes"),
            std::string::npos);
  EXPECT_NE(error_of(variant(R"({"pooling_mode_mean_tokens": true})",
                             R"([{"type": "sentence_transformers.models.Transformer"},
                                 {"type": "sentence_transformers.models.Pooling"},
                                 {"type": "sentence_transformers.models.Dense"}])"))
                .find("Dense"),
            std::string::npos);
  // Mean alone, with the usual modules: converts, pooling mean.
  const std::string ok = variant(R"({"pooling_mode_mean_tokens": true})",
                                 R"([{"type": "sentence_transformers.models.Transformer"},
                                     {"type": "sentence_transformers.models.Pooling"},
                                     {"type": "sentence_transformers.models.Normalize"}])");
  EXPECT_EQ(open_hf_source(ok, with_tokenizer()).metadata.get_i64("bert.pooling_type"), 1);
  fs::remove_all(ok);
}

}  // namespace
}  // namespace jitllm
