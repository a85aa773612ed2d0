// Grammar vocabulary of a tokenizer (see grammar_vocabulary.h).
#include "app/grammar_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace jitllm::app {

std::shared_ptr<const constrain::Vocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer,
                                                                     size_t n_tokens) {
  n_tokens = std::min(n_tokens, tokenizer.n_vocab());
  std::vector<std::string> bytes(n_tokens);
  std::vector<int32_t> ends;
  for (size_t id = 0; id < n_tokens; ++id) {
    const TokenId t = TokenId(id);
    if (tokenizer.vocab().is_eog(t)) {
      ends.push_back(int32_t(id));
      continue;
    }
    // special = false: control and unknown tokens render as "" and are never allowed.
    bytes[id] = tokenizer.piece(t, false);
  }
  return std::make_shared<const constrain::Vocabulary>(std::move(bytes), std::move(ends));
}

}  // namespace jitllm::app
