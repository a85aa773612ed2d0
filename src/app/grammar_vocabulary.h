// A model's vocabulary as grammars see it (constrain/vocabulary.h): each token's text as the
// decoder writes it, control tokens excluded, the end-of-generation tokens as the grammar's end.
#pragma once

#include <memory>

#include "constrain/vocabulary.h"

namespace jitllm {
class Tokenizer;
}  // namespace jitllm

namespace jitllm::app {

// n_tokens: the ids the sampler may choose (a head padded past the tokenizer has fewer tokens
// than logits). Not thread-safe on the tokenizer: call under the model's text lock.
std::shared_ptr<const constrain::Vocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer,
                                                                     size_t n_tokens);

}  // namespace jitllm::app
