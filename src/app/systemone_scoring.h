// System One's scoring: how each question is put to the model and how its answers are scored.
// Every candidate answer is scored exactly: prompt + answer is tokenized as one text, and the
// candidate's probability is the product of its tokens' conditional probabilities after the
// prefix all candidates of the question share (one forward pass when that is a single token).
// The state is prefilled once; every question forks its KV (prefix reuse). Runs on an Engine the
// caller owns, on the caller's thread: no scheduler, no cache of its own (see SessionCache).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "app/session_cache.h"
#include "app/systemone.h"
#include "runtime/engine.h"

namespace jitllm::app {

class LoadedModel;

// The text put before a question's answer.
std::string systemone_question_text(const SystemOneQuestion& q);
// Plain-text prompt for models without a chat template.
std::string systemone_plain_prompt(const std::string& state, const std::string& question);

// One candidate answer of a question: its label index and its token sequence (prompt + answer).
struct Candidate {
  size_t label = 0;  // noul: 0 = yes, 1 = no
  std::vector<int32_t> tokens;
};
struct QuestionPlan {
  std::vector<Candidate> candidates;
};
struct SystemOnePlan {
  std::vector<QuestionPlan> questions;  // in request order
  // Answers are normalised over the first n_tokens logits (the tokenizer's tokens; a head
  // padded past them is masked). 0: every logit.
  size_t n_tokens = 0;
};

// Builds the candidate token sequences with `prompt_of` (question -> prompt text) and
// `tokenize` (text -> ids with BOS as the model wants).
SystemOnePlan plan_systemone(const SystemOneRequest& request,
                             const std::function<std::string(const SystemOneQuestion&)>& prompt_of,
                             const std::function<std::vector<int32_t>(const std::string&)>& tokenize);
// The same for `model`: prompts through its own chat template when it has one, else plain text.
SystemOnePlan plan_systemone(const SystemOneRequest& request, const LoadedModel& model);

// Prompts are prefilled in chunks of this many tokens by default: jitllmd's prefill chunk, so
// `jitllm decide` meets the same chunks and answers as /v1/systemone does.
constexpr int64_t kSystemOneChunk = 64;

// The plan's evaluation cut into pieces that each run a bounded amount of work (one chunk of the
// shared state, or one question), so a server can run other sequences' steps between them.
// `cache` may be null; when given, the shared state is looked up in and returned to it, reused
// in multiples of `chunk` tokens (the state is prefilled in chunks at those offsets, so a warm
// answer equals a cold one bitwise). n_ctx: the sessions' context. Every call must come from the
// thread that owns `engine`, the destructor too.
class SystemOneEvaluation {
 public:
  // Throws RequestError (code context_length_exceeded) when a prompt does not fit n_ctx.
  SystemOneEvaluation(const SystemOnePlan& plan, Engine& engine, SessionCache* cache,
                      int64_t n_ctx, int64_t chunk = kSystemOneChunk);
  ~SystemOneEvaluation();
  // Runs the next piece (a chunk of the state, a question's own context, or one candidate
  // answer); false once everything has run.
  bool step();
  // The answers (after step() returned false); the state's session goes to the cache.
  SystemOneResult finish();

 private:
  // The question being scored, one piece at a time.
  struct OpenQuestion {
    const QuestionPlan* q = nullptr;
    size_t p = 0;                          // tokens every candidate shares (their common prefix)
    std::unique_ptr<Session> session;      // the state + the question's context
    std::vector<float> first_lp;           // [n_tokens] log-probabilities of the first answer token
    std::vector<std::vector<double>> per_label;  // candidates' log-probabilities by label
    size_t next_candidate = 0;
  };
  void open_question(const QuestionPlan& q);
  size_t scored_tokens() const;  // logits per row that count (the plan's vocabulary)
  void score_candidate();
  void close_question();

  const SystemOnePlan& plan_;
  Engine& engine_;
  SessionCache* cache_;
  int64_t chunk_;
  size_t shared_ = 0;  // tokens every candidate of every question starts with (the state)
  std::span<const int32_t> state_;
  std::unique_ptr<Session> base_;
  size_t next_question_ = 0;
  OpenQuestion open_;
  SystemOneResult res_;
};

// All of it at once, on the caller's thread (`jitllm decide`).
SystemOneResult evaluate_systemone(const SystemOnePlan& plan, Engine& engine, SessionCache* cache,
                                   int64_t n_ctx, int64_t chunk = kSystemOneChunk);

}  // namespace jitllm::app
