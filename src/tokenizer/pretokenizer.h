// Byte-level BPE pre-tokenization: the regex sequence llama.cpp uses for each
// `tokenizer.ggml.pre` value, compiled with PCRE2 (UTF + UCP, JIT), and the split that applies
// them one after another (each regex splits every piece the previous ones produced; text between
// matches stays a piece of its own, as in llama.cpp's unicode_regex_split).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm {

// What a `tokenizer.ggml.pre` value selects, besides its regexes.
struct PreTokenizerSpec {
  std::vector<std::string> regexes;
  bool clean_spaces = true;    // detokenize clean-up (llama.cpp turns it off for most modern BPEs)
  bool ignore_merges = false;  // a pre-token that is itself a vocab entry is taken whole
  bool add_bos = false;        // default add_bos (overridable by tokenizer.ggml.add_bos_token)
  bool no_bos = false;         // the model has no BOS token (chatglm)
};

// Throws jitllm::Error "unknown pre-tokenizer 'x'" for values llama.cpp does not know either.
// An empty `pre` selects llama.cpp's default BPE regexes.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);
// Every accepted `tokenizer.ggml.pre` value (for tests and `jitllm info`).
std::vector<std::string> known_pre_tokenizers();

// The compiled regex sequence. Thread-safe to use from several threads at once.
class PreTokenizer {
 public:
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits valid UTF-8 `text` into pieces (views into `text`), in order, covering all of it.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace jitllm
