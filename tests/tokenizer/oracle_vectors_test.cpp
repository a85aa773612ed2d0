// Every tokenizer vector of the oracle (llama.cpp b10472 / Hugging Face ids for the 12 vocab-only
// GGUFs, and llama.cpp's ids for the synthetic fixtures' 512-token vocab) must match exactly:
// same call as llama.cpp's test-tokenizer-0 (add_special = false, parse_special = false).
#include <gtest/gtest.h>

#include <sstream>

#include "io/gguf.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm {
namespace {

using testing::oracle_path;
using testing::read_text;

// test-tokenizer-0's format: tests separated by "\n__ggml_vocab_test__\n", file ends with one.
std::vector<std::string> split_inputs(const std::string& inp) {
  static const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> tests;
  size_t pos = 0;
  while (true) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    tests.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return tests;
}

std::vector<std::vector<TokenId>> parse_outputs(const std::string& out) {
  std::vector<std::vector<TokenId>> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<TokenId> ids;
    long long id;
    while (ls >> id) ids.push_back(TokenId(id));
    lines.push_back(std::move(ids));
  }
  return lines;
}

std::string show(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += " " + std::to_string(id);
  return s;
}

struct VectorCase {
  const char* gguf;  // relative to oracle/
  const char* inp;
  const char* out;
};

class OracleVectors : public ::testing::TestWithParam<VectorCase> {};

TEST_P(OracleVectors, MatchExactly) {
  const VectorCase& c = GetParam();
  const GgufFile file = GgufFile::open(oracle_path(c.gguf));
  const Tokenizer tok(file.metadata());
  const auto inputs = split_inputs(read_text(oracle_path(c.inp)));
  const auto expected = parse_outputs(read_text(oracle_path(c.out)));
  ASSERT_GE(inputs.size(), 40u);
  ASSERT_EQ(inputs.size(), expected.size());
  int failed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<TokenId> got = tok.encode(inputs[i], false, false);
    if (got != expected[i]) {
      ++failed;
      ADD_FAILURE() << c.gguf << " test " << i << " '" << inputs[i] << "'\n  expected:"
                    << show(expected[i]) << "\n  got:     " << show(got);
    }
  }
  EXPECT_EQ(failed, 0) << c.gguf << ": " << failed << " of " << inputs.size() << " differ";
}

#define JL_VOCAB(name, out) \
  VectorCase { "tokenizer/ggml-vocab-" name ".gguf", "tokenizer/ggml-vocab-" name ".gguf.inp", \
               "tokenizer/ggml-vocab-" name ".gguf." out }

INSTANTIATE_TEST_SUITE_P(
    Vocabs, OracleVectors,
    ::testing::Values(JL_VOCAB("llama-spm", "out"), JL_VOCAB("phi-3", "out"),
                      JL_VOCAB("baichuan", "llamacpp.out"), JL_VOCAB("gpt-2", "out"),
                      JL_VOCAB("gpt-neox", "llamacpp.out"), JL_VOCAB("mpt", "out"),
                      JL_VOCAB("falcon", "out"), JL_VOCAB("starcoder", "out"),
                      JL_VOCAB("refact", "out"), JL_VOCAB("deepseek-coder", "out"),
                      JL_VOCAB("deepseek-llm", "out"), JL_VOCAB("bert-bge", "out"),
                      VectorCase{"models/synth-llama.F32.gguf",
                                 "models/synth-llama.tokenizer-tests.inp",
                                 "models/synth-llama.tokenizer-tests.llamacpp.out"}),
    [](const ::testing::TestParamInfo<VectorCase>& info) {
      std::string name = info.param.gguf;
      name = name.substr(name.find('/') + 1);
      name = name.substr(0, name.find(".gguf"));
      for (char& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

}  // namespace
}  // namespace jitllm
