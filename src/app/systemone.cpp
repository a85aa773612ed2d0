// System One's request and answer JSON: parsing and validating the request (limits, labels,
// levels), and the answers object built from the scored probabilities.
#include "app/systemone.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "app/request_error.h"

namespace jitllm::app {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxQuestions = 64;
constexpr size_t kMaxLabels = 32;
// Answers over all questions (a noul question has two): each is scored with up to two forward
// passes, so this bounds the work one request can ask for (64 x 32 took 43 s on 2 cores).
constexpr size_t kMaxAnswers = 256;

std::string required_string(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    throw RequestError(where + "." + key, fmt::format("'{}.{}' is required", where, key));
  if (!it->is_string())
    throw RequestError(where + "." + key, fmt::format("'{}.{}' must be a string", where, key));
  return it->get<std::string>();
}

std::string level_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v));
  return fmt::format("{}", v);
}

void parse_labels(const json& q, SystemOneQuestion& out, const std::string& where) {
  if (out.type == "choice") {
    auto it = q.find("choices");
    if (it == q.end() || it->is_null())
      throw RequestError(where + ".choices", "a choice question needs 'choices'");
    if (it->is_array()) {
      for (const auto& c : *it) {
        if (!c.is_string()) throw RequestError(where + ".choices", "choices must be strings");
        out.labels.push_back(c.get<std::string>());
        out.descriptions.emplace_back();
      }
    } else if (it->is_object()) {
      for (const auto& [label, desc] : it->items()) {
        if (!desc.is_string())
          throw RequestError(where + ".choices", "choice descriptions must be strings");
        out.labels.push_back(label);
        out.descriptions.push_back(desc.get<std::string>());
      }
    } else {
      throw RequestError(where + ".choices",
                            "'choices' must be an array of labels or an object label -> text");
    }
  } else {
    auto it = q.find("levels");
    if (it == q.end() || it->is_null()) {
      for (int v = 1; v <= 5; ++v) out.level_values.push_back(v);
      out.numeric_levels = true;
    } else if (it->is_array()) {
      bool all_numbers = true;
      for (const auto& l : *it) {
        if (l.is_number()) {
          const double v = l.get<double>();
          if (!std::isfinite(v)) throw RequestError(where + ".levels", "levels must be finite");
          out.level_values.push_back(v);
          out.labels.push_back(level_text(v));
        } else if (l.is_string()) {
          all_numbers = false;
          out.labels.push_back(l.get<std::string>());
        } else {
          throw RequestError(where + ".levels", "levels must be numbers or strings");
        }
      }
      out.numeric_levels = all_numbers;
    } else {
      throw RequestError(where + ".levels", "'levels' must be an array");
    }
    if (out.numeric_levels && out.labels.empty())
      for (double v : out.level_values) out.labels.push_back(level_text(v));
    out.descriptions.assign(out.labels.size(), "");
  }
  const std::string field = where + (out.type == "choice" ? ".choices" : ".levels");
  if (out.labels.size() < 2 || out.labels.size() > kMaxLabels)
    throw RequestError(field, fmt::format("between 2 and {} options are needed, got {}",
                                             kMaxLabels, out.labels.size()));
  std::set<std::string> seen;
  for (const auto& l : out.labels) {
    if (l.empty()) throw RequestError(field, "option labels must not be empty");
    if (!seen.insert(l).second) throw RequestError(field, fmt::format("label '{}' repeats", l));
  }
}

}  // namespace

SystemOneRequest parse_systemone_request(const json& body) {
  if (!body.is_object())
    throw RequestError("", "the request body must be a JSON object", "");
  SystemOneRequest r;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) throw RequestError("model", "'model' must be a string");
    r.model = it->get<std::string>();
  }
  r.state = required_string(body, "state", "body");
  auto qs = body.find("questions");
  if (qs == body.end() || !qs->is_object() || qs->empty())
    throw RequestError("questions", "'questions' must be a non-empty object name -> question");
  if (qs->size() > kMaxQuestions)
    throw RequestError("questions", fmt::format("at most {} questions per request", kMaxQuestions));
  size_t answers = 0;
  for (const auto& [name, q] : qs->items()) {
    const std::string where = "questions." + name;
    if (!q.is_object()) throw RequestError(where, "each question must be an object");
    SystemOneQuestion out;
    out.name = name;
    out.type = required_string(q, "type", where);
    if (out.type != "noul" && out.type != "choice" && out.type != "score")
      throw RequestError(where + ".type",
                            fmt::format("unknown question type '{}' (noul, choice or score)", out.type));
    out.instructions = required_string(q, "instructions", where);
    if (auto c = q.find("criteria"); c != q.end() && !c->is_null()) {
      if (c->is_string()) {
        out.criteria = c->get<std::string>();
      } else if (c->is_array()) {
        for (const auto& line : *c) {
          if (!line.is_string()) throw RequestError(where + ".criteria", "criteria must be strings");
          out.criteria += (out.criteria.empty() ? "" : "\n") + line.get<std::string>();
        }
      } else {
        throw RequestError(where + ".criteria", "'criteria' must be a string or strings");
      }
    }
    if (out.type != "noul") parse_labels(q, out, where);
    answers += out.type == "noul" ? 2 : out.labels.size();
    if (answers > kMaxAnswers)
      throw RequestError("questions", fmt::format("the questions have more than {} answers in "
                                                  "all (noul counts 2); split the request",
                                                  kMaxAnswers));
    r.questions.push_back(std::move(out));
  }
  return r;
}

json systemone_response(const SystemOneRequest& request, const SystemOneResult& result,
                        const std::string& model_id) {
  json answers = json::object();
  for (size_t i = 0; i < request.questions.size(); ++i) {
    const SystemOneQuestion& q = request.questions[i];
    const std::vector<double>& p = result.label_probs[i];
    json a = {{"type", q.type}};
    if (q.type == "noul") {
      a["answer"] = p[0] >= p[1] ? "yes" : "no";
      a["p_yes"] = p[0];
    } else {
      size_t best = 0;
      json dist = json::object();
      double mean = 0;
      for (size_t l = 0; l < q.labels.size(); ++l) {
        const double pl = l < p.size() ? p[l] : 0.0;
        dist[q.labels[l]] = pl;
        if (pl > p[best]) best = l;
        if (q.numeric_levels) mean += pl * q.level_values[l];
      }
      if (q.numeric_levels && !q.level_values.empty()) {
        const double v = q.level_values[best];
        a["answer"] = v == std::floor(v) && std::fabs(v) < 1e15 ? json(int64_t(v)) : json(v);
      }
      else
        a["answer"] = q.labels[best];
      a["distribution"] = dist;
      if (q.numeric_levels) a["expected"] = mean;
    }
    answers[q.name] = a;
  }
  return {{"model", model_id},
          {"object", "systemone.answers"},
          {"answers", answers},
          {"usage",
           {{"prompt_tokens", result.prompt_tokens},
            {"tokens_evaluated", result.tokens_run},
            {"cached_tokens", result.tokens_cached},
            {"completion_tokens", 0},
            {"total_tokens", result.prompt_tokens}}}};
}

}  // namespace jitllm::app
