// Embedding and reranking inputs (see embeddings.h).
#include "app/embeddings.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::app {

Pooling embedding_pooling(const Engine& engine, Pooling requested) {
  const Pooling p = requested != Pooling::Unspecified ? requested : engine.config().pooling;
  if (p == Pooling::Unspecified || p == Pooling::None)
    throw_error("the model names no pooling for its embeddings ({}.pooling_type); choose one: "
                "--pooling mean, cls or last", engine.config().arch);
  if (p == Pooling::Rank)
    throw_error("the model is a reranker (rank pooling): it scores query/document pairs "
                "(/v1/rerank, jitllm embed --rerank), it does not embed texts");
  return p;
}

std::vector<int32_t> embedding_tokens(const LoadedModel& model, const std::string& text) {
  return model.tokenize_text(text, /*add_special=*/true);
}

RerankInput rerank_input(const LoadedModel& model, const std::string& query,
                         const std::string& document) {
  const Engine& engine = model.engine();
  if (engine.rank_classes() == 0)
    throw_error("the model has no classification head (cls.output.weight): it cannot rerank");
  // Two classes (relevant or not) would need the relevant one's logit: not guessed.
  if (engine.rank_classes() != 1)
    throw_error("the model's classification head has {} classes; reranking reads a one-label "
                "head's score", engine.rank_classes());
  const TokenId sep = model.tokenizer().vocab().sep;
  if (sep == kNoToken) throw_error("the vocabulary has no separator token to join query and document");
  RerankInput in;
  in.ids = model.tokenize_text(query, /*add_special=*/true);
  if (in.ids.empty() || in.ids.back() != sep) in.ids.push_back(sep);
  const size_t first_of_document = in.ids.size();
  const std::vector<int32_t> doc = model.tokenize_text(document, /*add_special=*/false);
  in.ids.insert(in.ids.end(), doc.begin(), doc.end());
  in.ids.push_back(sep);
  if (engine.token_types() > 1) {
    in.types.assign(in.ids.size(), 0);
    std::fill(in.types.begin() + ptrdiff_t(first_of_document), in.types.end(), 1);
  }
  return in;
}

}  // namespace jitllm::app
