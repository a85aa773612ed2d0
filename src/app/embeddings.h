// Embeddings and reranking over a loaded model, as the CLI (`jitllm embed`) and jitllmd
// (/v1/embeddings, /v1/rerank) both do them: inputs tokenized the way the model's tokenizer
// frames a sequence ([CLS] text [SEP] for BERT, BOS text for a decoder), the pooling the model
// names unless the caller overrides it, and a cross-encoder's pairs framed [CLS] query [SEP]
// document [SEP].
#pragma once

#include <string>
#include <vector>

#include "app/loaded_model.h"

namespace jitllm::app {

// The pooling embeddings use: `requested` when given (not Unspecified), else the model's. Throws
// jitllm::Error naming the fix when neither says one (a decoder GGUF without
// <arch>.pooling_type: choose one), or when it is rank (that is reranking, not embedding).
Pooling embedding_pooling(const Engine& engine, Pooling requested);

// One text's ids for an embedding: the tokenizer's special framing added.
std::vector<int32_t> embedding_tokens(const LoadedModel& model, const std::string& text);

// A (query, document) pair for a cross-encoder: the ids [CLS] query [SEP] document [SEP] and,
// for a model with token types, their types (0 for [CLS] query [SEP], 1 for document [SEP], as
// HF's pair template; empty for a one-type model). Throws when the model has no one-label
// classification head.
struct RerankInput {
  std::vector<int32_t> ids;
  std::vector<int32_t> types;
};
RerankInput rerank_input(const LoadedModel& model, const std::string& query, const std::string& document);

}  // namespace jitllm::app
