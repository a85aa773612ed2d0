// Grammar vocabulary of a tokenizer (see grammar_vocabulary.h).
#include "app/grammar_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace jitllm::app {

const std::vector<std::string>& tool_call_markers() {
  static const std::vector<std::string> markers = {
      "<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
      // DeepSeek V3.1
      "<\uFF5Ctool\u2581calls\u2581begin\uFF5C>", "<\uFF5Ctool\u2581calls\u2581end\uFF5C>",
      "<\uFF5Ctool\u2581call\u2581begin\uFF5C>", "<\uFF5Ctool\u2581call\u2581end\uFF5C>",
      "<\uFF5Ctool\u2581sep\uFF5C>",
      // GLM
      "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
  return markers;
}

std::vector<int32_t> rendered_control_tokens(const Tokenizer& tokenizer, size_t n_tokens) {
  n_tokens = std::min(n_tokens, tokenizer.n_vocab());
  std::vector<int32_t> ids;
  const auto& markers = tool_call_markers();
  for (size_t id = 0; id < n_tokens; ++id) {
    const TokenId t = TokenId(id);
    if (tokenizer.vocab().is_eog(t) || !tokenizer.piece(t, false).empty()) continue;
    const std::string& text = tokenizer.piece(t);
    if (std::find(markers.begin(), markers.end(), text) != markers.end()) ids.push_back(int32_t(id));
  }
  return ids;
}

std::shared_ptr<const constrain::Vocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer,
                                                                     size_t n_tokens,
                                                                     bool tool_markers) {
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
  if (tool_markers)
    for (int32_t id : rendered_control_tokens(tokenizer, n_tokens)) bytes[size_t(id)] = tokenizer.piece(id);
  return std::make_shared<const constrain::Vocabulary>(std::move(bytes), std::move(ends));
}

}  // namespace jitllm::app
