// Pre-tokenizer splits against llama.cpp's own unicode_regex_split: data/gen_pre_splits.cpp
// (built with llama.cpp's src/unicode.cpp + unicode-data.cpp from the /work/peers snapshot) split
// the 256 strings of data/inputs.txt with every distinct regex set of our table (20 of them:
// default, llama3, qwen35, deepseek-*, falcon, starcoder, gpt-2, tekken, gpt-4o, ...); the piece
// end offsets must be identical. This covers pre-tokenizers whose vocabularies the oracle lacks
// (llama-bpe, qwen2, command-r, gpt-4o ...) and llama.cpp's three matching paths (its own
// matchers, "collapsed" category bytes, std::wregex with non-ASCII spaces as \v).
// Not covered (known to differ): superbpe (llama.cpp keeps empty pieces around zero-width
// matches; ids are unaffected) and tiny_aya/cohere2moe (llama.cpp's hand-written digit grouping).
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tokenizer/pretokenizer.h"
#include "vocab_cache.h"

namespace jitllm {
namespace {

std::string data_dir() { return std::string(JITLLM_SOURCE_DIR) + "/tests/tokenizer/data/"; }

TEST(PreSplitDifferential, PieceBoundariesMatchLlamaCpp) {
  const std::string all = testing::read_text(data_dir() + "inputs.txt");
  static const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> tests;
  for (size_t pos = 0, next; (next = all.find(sep, pos)) != std::string::npos; pos = next + sep.size())
    tests.push_back(all.substr(pos, next - pos));
  ASSERT_EQ(tests.size(), 256u);

  std::map<std::string, std::unique_ptr<PreTokenizer>> pre;
  std::map<std::string, int> failures;
  std::istringstream ref(testing::read_text(data_dir() + "llamacpp/pre_splits.txt"));
  size_t n_lines = 0;
  for (std::string line; std::getline(ref, line);) {
    std::istringstream ls(line);
    std::string name;
    size_t i;
    ls >> name >> i;
    ASSERT_LT(i, tests.size());
    std::vector<size_t> want;
    for (size_t off; ls >> off;) want.push_back(off);
    auto& p = pre[name];
    if (!p) p = std::make_unique<PreTokenizer>(pre_tokenizer_spec(name).regexes);
    std::vector<size_t> got;
    size_t off = 0;
    for (std::string_view piece : p->split(tests[i])) got.push_back(off += piece.size());
    ++n_lines;
    if (got != want && ++failures[name] <= 3) {
      std::string w, g;
      for (size_t o : want) w += " " + std::to_string(o);
      for (size_t o : got) g += " " + std::to_string(o);
      ADD_FAILURE() << name << " #" << i << " '" << tests[i] << "'\n  llama.cpp:" << w
                    << "\n  ours:     " << g;
    }
  }
  EXPECT_EQ(n_lines, 20u * tests.size());
  EXPECT_EQ(pre.size(), 20u);
  for (const auto& [name, n] : failures) ADD_FAILURE() << name << ": " << n << " strings differ";
}

}  // namespace
}  // namespace jitllm
