// System One's scoring: question prompts, the candidate token sequences, and their evaluation
// over forked sessions (the state prefilled once, then one fork per question and per longer
// answer).
#include "app/systemone_scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <span>

#include "app/loaded_model.h"
#include "app/request_error.h"
#include "core/error.h"
#include "runtime/session_fork.h"
#include "sample/logprobs.h"

namespace jitllm::app {

namespace {

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

SystemOnePlan plan_systemone(const SystemOneRequest& r, const LoadedModel& model) {
  const bool chat = model.has_own_template();
  // The state, the questions and the answers are request text: a control token spelled in them
  // stays text (chat/content_guard.h). The candidates are the last prompt plus an answer.
  chat::GuardedPrompt last;
  auto prompt_of = [&](const SystemOneQuestion& q) {
    const std::string question = systemone_question_text(q);
    if (!chat) return systemone_plain_prompt(r.state, question);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", r.state + "\n\nQuestion: " + question}});
    last = model.render_chat_guarded(messages, nullptr);
    return last.text;
  };
  auto tokenize = [&](const std::string& text) {
    if (!chat) return model.tokenize_prompt(text);
    if (!text.starts_with(last.text)) return model.tokenize_rendered(text);
    chat::GuardedPrompt candidate = last;
    chat::append_request_text(candidate, text.substr(last.text.size()), model.guarded_texts());
    return model.tokenize_rendered(candidate);
  };
  return plan_systemone(r, prompt_of, tokenize);
}

SystemOneResult evaluate_systemone(const SystemOnePlan& plan, Engine& engine, SessionCache* cache,
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
    throw RequestError("state",
                       fmt::format("the state and question take {} tokens, more than the context "
                                   "of {}", res.prompt_tokens, n_ctx),
                       "context_length_exceeded");
  const std::span<const int32_t> state(first->data(), shared);

  std::unique_ptr<Session> base;
  if (cache) {
    SessionCache::Match hit = cache->take_longest(state, chunk);
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

}  // namespace jitllm::app
