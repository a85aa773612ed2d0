// System One: request parsing, prompts, candidate scoring over forked sessions, the answer JSON.
#include "server/systemone.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "runtime/session_fork.h"
#include "sample/logprobs.h"
#include "server/api_error.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxQuestions = 64;
constexpr size_t kMaxLabels = 32;

std::string required_string(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    throw invalid_request(where + "." + key, fmt::format("'{}.{}' is required", where, key));
  if (!it->is_string())
    throw invalid_request(where + "." + key, fmt::format("'{}.{}' must be a string", where, key));
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
      throw invalid_request(where + ".choices", "a choice question needs 'choices'");
    if (it->is_array()) {
      for (const auto& c : *it) {
        if (!c.is_string()) throw invalid_request(where + ".choices", "choices must be strings");
        out.labels.push_back(c.get<std::string>());
        out.descriptions.emplace_back();
      }
    } else if (it->is_object()) {
      for (const auto& [label, desc] : it->items()) {
        if (!desc.is_string())
          throw invalid_request(where + ".choices", "choice descriptions must be strings");
        out.labels.push_back(label);
        out.descriptions.push_back(desc.get<std::string>());
      }
    } else {
      throw invalid_request(where + ".choices",
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
          if (!std::isfinite(v)) throw invalid_request(where + ".levels", "levels must be finite");
          out.level_values.push_back(v);
          out.labels.push_back(level_text(v));
        } else if (l.is_string()) {
          all_numbers = false;
          out.labels.push_back(l.get<std::string>());
        } else {
          throw invalid_request(where + ".levels", "levels must be numbers or strings");
        }
      }
      out.numeric_levels = all_numbers;
    } else {
      throw invalid_request(where + ".levels", "'levels' must be an array");
    }
    if (out.numeric_levels && out.labels.empty())
      for (double v : out.level_values) out.labels.push_back(level_text(v));
    out.descriptions.assign(out.labels.size(), "");
  }
  const std::string field = where + (out.type == "choice" ? ".choices" : ".levels");
  if (out.labels.size() < 2 || out.labels.size() > kMaxLabels)
    throw invalid_request(field, fmt::format("between 2 and {} options are needed, got {}",
                                             kMaxLabels, out.labels.size()));
  std::set<std::string> seen;
  for (const auto& l : out.labels) {
    if (l.empty()) throw invalid_request(field, "option labels must not be empty");
    if (!seen.insert(l).second) throw invalid_request(field, fmt::format("label '{}' repeats", l));
  }
}

double log_sum_exp(const std::vector<double>& xs) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : xs) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : xs) s += std::exp(x - m);
  return m + std::log(s);
}

size_t common_len(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return size_t(common_prefix(a, b));
}

}  // namespace

SystemOneRequest parse_systemone_request(const json& body) {
  if (!body.is_object())
    throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
  SystemOneRequest r;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) throw invalid_request("model", "'model' must be a string");
    r.model = it->get<std::string>();
  }
  r.state = required_string(body, "state", "body");
  auto qs = body.find("questions");
  if (qs == body.end() || !qs->is_object() || qs->empty())
    throw invalid_request("questions", "'questions' must be a non-empty object name -> question");
  if (qs->size() > kMaxQuestions)
    throw invalid_request("questions", fmt::format("at most {} questions per request", kMaxQuestions));
  for (const auto& [name, q] : qs->items()) {
    const std::string where = "questions." + name;
    if (!q.is_object()) throw invalid_request(where, "each question must be an object");
    SystemOneQuestion out;
    out.name = name;
    out.type = required_string(q, "type", where);
    if (out.type != "noul" && out.type != "choice" && out.type != "score")
      throw invalid_request(where + ".type",
                            fmt::format("unknown question type '{}' (noul, choice or score)", out.type));
    out.instructions = required_string(q, "instructions", where);
    if (auto c = q.find("criteria"); c != q.end() && !c->is_null()) {
      if (c->is_string()) {
        out.criteria = c->get<std::string>();
      } else if (c->is_array()) {
        for (const auto& line : *c) {
          if (!line.is_string()) throw invalid_request(where + ".criteria", "criteria must be strings");
          out.criteria += (out.criteria.empty() ? "" : "\n") + line.get<std::string>();
        }
      } else {
        throw invalid_request(where + ".criteria", "'criteria' must be a string or strings");
      }
    }
    if (out.type != "noul") parse_labels(q, out, where);
    r.questions.push_back(std::move(out));
  }
  return r;
}

std::string systemone_question_text(const SystemOneQuestion& q) {
  std::string t = q.instructions;
  if (!q.criteria.empty()) t += "\nCriteria: " + q.criteria;
  if (q.type == "noul") {
    t += "\nAnswer yes or no.";
  } else if (q.type == "choice") {
    t += "\nOptions:";
    for (size_t i = 0; i < q.labels.size(); ++i)
      t += "\n- " + q.labels[i] + (q.descriptions[i].empty() ? "" : ": " + q.descriptions[i]);
    t += "\nAnswer with one option label.";
  } else {
    t += "\nLevels:";
    for (const auto& l : q.labels) t += " " + l;
    t += "\nAnswer with one level.";
  }
  return t;
}

std::string systemone_plain_prompt(const std::string& state, const std::string& question) {
  return state + "\n\nQuestion: " + question + "\nAnswer:";
}

SystemOnePlan plan_systemone(const SystemOneRequest& request,
                             const std::function<std::string(const SystemOneQuestion&)>& prompt_of,
                             const std::function<std::vector<int32_t>(const std::string&)>& tokenize) {
  SystemOnePlan plan;
  for (const SystemOneQuestion& q : request.questions) {
    const std::string prompt = prompt_of(q);
    // A plain prompt ends with "Answer:" (answers follow a space); a chat prompt ends with the
    // assistant header (answers start the message). Both spellings are scored either way and
    // their probabilities added, so the prompt style does not decide the answer.
    std::vector<std::pair<size_t, std::string>> answers;
    if (q.type == "noul") {
      for (const char* y : {"yes", "Yes"}) answers.emplace_back(0, y);
      for (const char* n : {"no", "No"}) answers.emplace_back(1, n);
    } else {
      for (size_t i = 0; i < q.labels.size(); ++i) answers.emplace_back(i, q.labels[i]);
    }
    QuestionPlan qp;
    std::set<std::vector<int32_t>> seen;
    for (const auto& [label, text] : answers)
      for (const std::string& spelled : {" " + text, text}) {
        Candidate c{label, tokenize(prompt + spelled)};
        if (c.tokens.empty() || !seen.insert(c.tokens).second) continue;
        qp.candidates.push_back(std::move(c));
      }
    plan.questions.push_back(std::move(qp));
  }
  return plan;
}

SystemOneResult evaluate_systemone(const SystemOnePlan& plan, Engine& engine, PrefixCache* cache,
                                   int64_t n_ctx, int64_t chunk) {
  if (chunk <= 0) throw_error("systemone: chunk must be positive");
  SystemOneResult res;
  const size_t n_vocab = size_t(engine.config().n_vocab);
  // G: the prefix every candidate of every question shares (the state), one token short of the
  // shortest candidate so each has something left to score.
  const std::vector<int32_t>* first = nullptr;
  size_t shared = std::numeric_limits<size_t>::max();
  for (const QuestionPlan& q : plan.questions)
    for (const Candidate& c : q.candidates) {
      if (!first) first = &c.tokens;
      shared = std::min({shared, common_len(*first, c.tokens), c.tokens.size() - 1});
      res.prompt_tokens = std::max(res.prompt_tokens, int64_t(c.tokens.size()));
    }
  if (!first) throw_error("systemone: no candidate answers");
  if (res.prompt_tokens > n_ctx)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the state and question take {} tokens, more than the context of {}",
                               res.prompt_tokens, n_ctx),
                   "state", "context_length_exceeded");
  const std::span<const int32_t> state(first->data(), shared);

  std::unique_ptr<Session> base;
  if (cache) {
    PrefixCache::Match hit = cache->take_longest(state, chunk);
    if (hit.session) {
      int64_t keep = std::min<int64_t>(hit.common, int64_t(shared));
      keep -= keep % chunk;
      hit.session->truncate(keep);
      res.tokens_cached = keep;
      base = std::move(hit.session);
    }
  }
  if (!base) base = engine.new_session(n_ctx);
  if (base->position() < int64_t(shared)) {
    const auto rest = state.subspan(size_t(base->position()));
    engine.prefill(*base, rest, false, chunk);
    res.tokens_run += int64_t(rest.size());
  }

  for (const QuestionPlan& q : plan.questions) {
    size_t p = std::numeric_limits<size_t>::max();
    for (const Candidate& c : q.candidates)
      p = std::min({p, common_len(q.candidates[0].tokens, c.tokens), c.tokens.size() - 1});
    if (p == 0) throw_error("systemone: a candidate answer has no context");
    // Logits at position p-1 predict every candidate's first answer token.
    const size_t start = std::min(shared, p - 1);
    auto qs = fork_session(engine, *base, int64_t(start));
    const std::span<const int32_t> ctx(q.candidates[0].tokens.data() + start, p - start);
    const std::vector<float> logits = engine.prefill(*qs, ctx, false);
    res.tokens_run += int64_t(ctx.size());
    const std::vector<float> first_lp = log_softmax(logits);

    size_t n_labels = 0;
    for (const Candidate& c : q.candidates) n_labels = std::max(n_labels, c.label + 1);
    std::vector<std::vector<double>> per_label(n_labels);
    for (const Candidate& c : q.candidates) {
      const std::span<const int32_t> ans(c.tokens.data() + p, c.tokens.size() - p);
      double lp = first_lp[size_t(ans[0])];
      if (ans.size() > 1) {
        auto f = fork_session(engine, *qs);
        const std::vector<float> rows = engine.prefill(*f, ans.first(ans.size() - 1), true);
        res.tokens_run += int64_t(ans.size() - 1);
        for (size_t j = 1; j < ans.size(); ++j)
          lp += logprobs(std::span<const float>(rows.data() + (j - 1) * n_vocab, n_vocab), ans[j]);
      }
      per_label[c.label].push_back(lp);
    }
    std::vector<double> label_lp(n_labels);
    for (size_t l = 0; l < n_labels; ++l) label_lp[l] = log_sum_exp(per_label[l]);
    const double total = log_sum_exp(label_lp);
    std::vector<double> probs(n_labels);
    for (size_t l = 0; l < n_labels; ++l) probs[l] = std::exp(label_lp[l] - total);
    res.label_probs.push_back(std::move(probs));
  }
  if (cache) cache->put(std::move(base));
  return res;
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

}  // namespace jitllm::server
