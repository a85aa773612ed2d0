// A model's vocabulary as grammars see it (constrain/vocabulary.h): each token's text as the
// decoder writes it, control tokens excluded (but for the tool-call markers in a vocabulary for
// tool calls, whose decoder writes them out), the end-of-generation tokens as the grammar's end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constrain/vocabulary.h"

namespace jitllm {
class Tokenizer;
}  // namespace jitllm

namespace jitllm::app {

// The texts tool calls are written with, in every syntax the server parses (server/
// tool_syntax.h); some are control tokens of their models (Mistral's [TOOL_CALLS], Llama's
// <|python_tag|>).
const std::vector<std::string>& tool_call_markers();

// The control tokens whose text is a tool-call marker: a constrained output may choose them and
// its decoder writes them as text.
std::vector<int32_t> rendered_control_tokens(const Tokenizer& tokenizer, size_t n_tokens);

// n_tokens: the ids the sampler may choose (a head padded past the tokenizer has fewer tokens
// than logits). Not thread-safe on the tokenizer: call under the model's text lock.
// `tool_markers`: the tool-call marker control tokens are text too (grammars that hold tool
// calls); otherwise no control token is.
std::shared_ptr<const constrain::Vocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer,
                                                                     size_t n_tokens,
                                                                     bool tool_markers = false);

}  // namespace jitllm::app
