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

// A (query, document) pair's ids for a cross-encoder: [CLS] query [SEP] document [SEP]. Throws
// when the model has no classification head or more than one token type (segment ids are not
// modelled: every token is of type 0, as llama.cpp does).
std::vector<int32_t> rerank_tokens(const LoadedModel& model, const std::string& query,
                                   const std::string& document);

}  // namespace jitllm::app
