// System One decision API (POST /v1/systemone, `jitllm decide`): questions about one state
// answered from the model's next-token distribution, never by generating text.
//   noul   -> P(yes) over the model's yes/no answer tokens
//   choice -> the distribution over the option labels
//   score  -> the distribution over the levels (and their mean when the levels are numbers)
// Every candidate answer is scored exactly: prompt + answer is tokenized as one text, and the
// candidate's probability is the product of its tokens' conditional probabilities after the
// prefix all candidates of the question share (one forward pass when that is a single token).
// The state is prefilled once; every question forks its KV (prefix reuse).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/prefix_cache.h"

namespace jitllm::server {

struct SystemOneQuestion {
  std::string name;
  std::string type;  // noul | choice | score
  std::string instructions, criteria;
  std::vector<std::string> labels;        // choice: option labels; score: levels as text
  std::vector<std::string> descriptions;  // choice: per label ("" when none)
  bool numeric_levels = false;
  std::vector<double> level_values;
};

struct SystemOneRequest {
  std::string model;
  std::string state;
  std::vector<SystemOneQuestion> questions;
};

// Throws ApiError 400 naming the field.
SystemOneRequest parse_systemone_request(const nlohmann::json& body);

// The text put before a question's answer. `chat` renders through the model's template.
using RenderFn = std::function<std::string(const std::string& state, const std::string& question)>;
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
};

// Builds the candidate token sequences with `prompt_of` (question -> prompt text) and
// `tokenize` (text -> ids with BOS as the model wants).
SystemOnePlan plan_systemone(const SystemOneRequest& request,
                             const std::function<std::string(const SystemOneQuestion&)>& prompt_of,
                             const std::function<std::vector<int32_t>(const std::string&)>& tokenize);

struct SystemOneResult {
  std::vector<std::vector<double>> label_probs;  // [question][label], sums to 1
  int64_t tokens_run = 0;     // tokens the model ran
  int64_t tokens_cached = 0;  // tokens reused from the prefix cache
  int64_t prompt_tokens = 0;  // longest question prompt
};

// Runs the plan on `engine`. `cache` may be null; when given, the shared state is looked up in
// and returned to it, reused in multiples of `chunk` tokens (the state is prefilled in chunks at
// those offsets, so a warm answer equals a cold one bitwise). n_ctx: the sessions' context.
SystemOneResult evaluate_systemone(const SystemOnePlan& plan, Engine& engine, PrefixCache* cache,
                                   int64_t n_ctx, int64_t chunk = 64);

// {"model", "answers": {name: {...}}, "usage"}.
nlohmann::json systemone_response(const SystemOneRequest& request, const SystemOneResult& result,
                                  const std::string& model_id);

}  // namespace jitllm::server
