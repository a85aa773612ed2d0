// Differential test against llama.cpp itself: 256 strings (tests/tokenizer/data/inputs.txt:
// random mixes of scripts, every kind of space, marks, emoji/ZWJ, invalid-free UTF-8, special-token
// texts with spaces around them, long runs) were run through llama.cpp (data/gen_llamacpp.cpp,
// the /work/peers snapshot that reproduces the oracle's .out files byte for byte) for all 12
// oracle vocabs: llama_tokenize with (add_special, parse_special) = (0,0), (0,1), (1,1) and
// llama_detokenize of the (0,0) ids with (remove_special, unparse_special) = (0,0) and of the
// (1,1) ids with (1,1). Every id and every byte must match.
#include <gtest/gtest.h>

#include <sstream>

#include "vocab_cache.h"

namespace jitllm {
namespace {

std::string data_dir() { return std::string(JITLLM_SOURCE_DIR) + "/tests/tokenizer/data/"; }

std::vector<std::string> inputs() {
  const std::string all = testing::read_text(data_dir() + "inputs.txt");
  static const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> tests;
  for (size_t pos = 0, next; (next = all.find(sep, pos)) != std::string::npos; pos = next + sep.size())
    tests.push_back(all.substr(pos, next - pos));
  return tests;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string show(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += " " + std::to_string(id);
  return s;
}

class LlamaCppDifferential : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppDifferential, IdsAndTextMatch) {
  const std::string name = GetParam();
  const Tokenizer& tok = testing::oracle_tokenizer(name);
  const auto tests = inputs();
  ASSERT_EQ(tests.size(), 256u);
  std::istringstream ref(testing::read_text(data_dir() + "llamacpp/" + name + ".txt"));
  std::string line;
  size_t n_lines = 0;
  int failed = 0;
  std::vector<TokenId> e00, e11;
  while (std::getline(ref, line)) {
    std::istringstream ls(line);
    size_t i;
    std::string kind;
    ls >> i >> kind;
    ASSERT_LT(i, tests.size());
    const std::string& text = tests[i];
    ++n_lines;
    if (kind[0] == 'E') {
      const bool add = kind[1] == '1', parse = kind[2] == '1';
      std::vector<TokenId> want;
      for (TokenId id; ls >> id;) want.push_back(id);
      const auto got = tok.encode(text, add, parse);
      if (kind == "E00") e00 = want;
      if (kind == "E11") e11 = want;
      if (got != want && ++failed <= 10)
        ADD_FAILURE() << name << " #" << i << " " << kind << " '" << text << "'\n  llama.cpp:"
                      << show(want) << "\n  ours:     " << show(got);
    } else {
      std::string hex;
      ls >> hex;
      const bool both = kind == "D11";
      const std::string got = tok.decode(both ? e11 : e00, both, both);
      if (got != from_hex(hex) && ++failed <= 10)
        ADD_FAILURE() << name << " #" << i << " " << kind << " '" << text << "'\n  llama.cpp: '"
                      << from_hex(hex) << "'\n  ours:      '" << got << "'";
    }
  }
  EXPECT_EQ(n_lines, tests.size() * 5);
  EXPECT_EQ(failed, 0) << name << ": " << failed << " of " << n_lines << " differ";
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaCppDifferential,
                         ::testing::Values("llama-spm", "phi-3", "baichuan", "gpt-2", "gpt-neox",
                                           "mpt", "falcon", "starcoder", "refact",
                                           "deepseek-coder", "deepseek-llm", "bert-bge"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace jitllm
