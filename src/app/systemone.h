// System One's request and answer (POST /v1/systemone, `jitllm decide`): questions about one
// state, answered from the model's next-token distribution, never by generating text.
//   {model, state, questions: {name: {type: noul | choice | score, instructions, ...}}}
//     -> {model, object, answers: {name: {...}}, usage}
//   noul   -> P(yes) over the model's yes/no answer tokens
//   choice -> the distribution over the option labels
//   score  -> the distribution over the levels (and their mean when the levels are numbers)
// This file owns the JSON on both sides; systemone_scoring.h computes the numbers. It knows no
// transport: refusals are app::RequestError naming the field, and the server picks the status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace jitllm::app {

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

// Throws RequestError naming the field.
SystemOneRequest parse_systemone_request(const nlohmann::json& body);

// The numbers the answers are made of (evaluate_systemone's result).
struct SystemOneResult {
  std::vector<std::vector<double>> label_probs;  // [question][label], sums to 1
  int64_t tokens_run = 0;     // tokens the model ran
  int64_t tokens_cached = 0;  // tokens reused from a session cache
  int64_t prompt_tokens = 0;  // longest question prompt
};

// {"model", "object", "answers": {name: {...}}, "usage"}.
nlohmann::json systemone_response(const SystemOneRequest& request, const SystemOneResult& result,
                                  const std::string& model_id);

}  // namespace jitllm::app
