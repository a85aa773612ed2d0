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
#include "tokenizer/tokenizer.h"

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
  SystemOnePlan plan = plan_systemone(r, prompt_of, tokenize);
  plan.n_tokens = model.tokenizer().n_vocab();
  return plan;
}

SystemOneEvaluation::SystemOneEvaluation(const SystemOnePlan& plan, Engine& engine,
                                         SessionCache* cache, int64_t n_ctx, int64_t chunk)
    : plan_(plan), engine_(engine), cache_(cache), chunk_(chunk) {
  if (chunk <= 0) throw_error("systemone: chunk must be positive");
  // G: the prefix every candidate of every question shares (the state), one token short of the
  // shortest candidate so each has something left to score.
  const std::vector<int32_t>* first = nullptr;
  size_t shared = std::numeric_limits<size_t>::max();
  for (const QuestionPlan& q : plan.questions)
    for (const Candidate& c : q.candidates) {
      if (!first) first = &c.tokens;
      shared = std::min({shared, common_len(*first, c.tokens), c.tokens.size() - 1});
      res_.prompt_tokens = std::max(res_.prompt_tokens, int64_t(c.tokens.size()));
    }
  if (!first) throw_error("systemone: no candidate answers");
  if (res_.prompt_tokens > n_ctx)
    throw RequestError("state",
                       fmt::format("the state and question take {} tokens, more than the context "
                                   "of {}", res_.prompt_tokens, n_ctx),
                       "context_length_exceeded");
  shared_ = shared;
  state_ = std::span<const int32_t>(first->data(), shared);
  if (cache) {
    SessionCache::Match hit = cache->take_longest(state_, chunk);
    if (hit.session) {
      int64_t keep = std::min<int64_t>(hit.common, int64_t(shared));
      keep -= keep % chunk;
      hit.session->truncate(keep);
      res_.tokens_cached = keep;
      base_ = std::move(hit.session);
    }
  }
  if (!base_) base_ = engine.new_session(n_ctx);
}

SystemOneEvaluation::~SystemOneEvaluation() = default;

bool SystemOneEvaluation::step() {
  if (base_->position() < int64_t(shared_)) {
    // One chunk of the state, ending at a chunk boundary (what a cold run would run).
    const int64_t pos = base_->position();
    const int64_t end = std::min<int64_t>(int64_t(shared_), pos - pos % chunk_ + chunk_);
    engine_.prefill(*base_, state_.subspan(size_t(pos), size_t(end - pos)), false, chunk_);
    res_.tokens_run += end - pos;
    return true;
  }
  // One candidate per piece: a question of 32 multi-token answers was one piece of 33 prefills,
  // and the sequences generating beside it waited seconds for their next step.
  if (open_.q) {
    score_candidate();
    if (open_.next_candidate == open_.q->candidates.size()) close_question();
  } else if (next_question_ < plan_.questions.size()) {
    open_question(plan_.questions[next_question_++]);
  }
  return open_.q || next_question_ < plan_.questions.size();
}

size_t SystemOneEvaluation::scored_tokens() const {
  const size_t n_vocab = size_t(engine_.config().n_vocab);  // logits per row
  return plan_.n_tokens > 0 ? std::min(plan_.n_tokens, n_vocab) : n_vocab;
}

void SystemOneEvaluation::open_question(const QuestionPlan& q) {
  size_t p = std::numeric_limits<size_t>::max();
  for (const Candidate& c : q.candidates)
    p = std::min({p, common_len(q.candidates[0].tokens, c.tokens), c.tokens.size() - 1});
  if (p == 0) throw_error("systemone: a candidate answer has no context");
  // Logits at position p-1 predict every candidate's first answer token.
  const size_t start = std::min(shared_, p - 1);
  open_.session = fork_session(engine_, *base_, int64_t(start));
  const std::span<const int32_t> ctx(q.candidates[0].tokens.data() + start, p - start);
  const std::vector<float> logits = engine_.prefill(*open_.session, ctx, false);
  res_.tokens_run += int64_t(ctx.size());
  open_.first_lp = log_softmax(std::span<const float>(logits).first(scored_tokens()));
  size_t n_labels = 0;
  for (const Candidate& c : q.candidates) n_labels = std::max(n_labels, c.label + 1);
  open_.per_label.assign(n_labels, {});
  open_.p = p;
  open_.next_candidate = 0;
  open_.q = &q;
}

void SystemOneEvaluation::score_candidate() {
  const size_t n_vocab = size_t(engine_.config().n_vocab);
  const Candidate& c = open_.q->candidates[open_.next_candidate++];
  const std::span<const int32_t> ans(c.tokens.data() + open_.p, c.tokens.size() - open_.p);
  double lp = open_.first_lp[size_t(ans[0])];
  if (ans.size() > 1) {
    auto f = fork_session(engine_, *open_.session);
    const std::vector<float> rows = engine_.prefill(*f, ans.first(ans.size() - 1), true);
    res_.tokens_run += int64_t(ans.size() - 1);
    for (size_t j = 1; j < ans.size(); ++j)
      lp += logprobs(std::span<const float>(rows.data() + (j - 1) * n_vocab, scored_tokens()), ans[j]);
  }
  open_.per_label[c.label].push_back(lp);
}

void SystemOneEvaluation::close_question() {
  const size_t n_labels = open_.per_label.size();
  std::vector<double> label_lp(n_labels);
  for (size_t l = 0; l < n_labels; ++l) label_lp[l] = log_sum_exp(open_.per_label[l]);
  const double total = log_sum_exp(label_lp);
  std::vector<double> probs(n_labels);
  for (size_t l = 0; l < n_labels; ++l) probs[l] = std::exp(label_lp[l] - total);
  res_.label_probs.push_back(std::move(probs));
  open_ = OpenQuestion{};
}

SystemOneResult SystemOneEvaluation::finish() {
  if (cache_ && base_) cache_->put(std::move(base_));
  return std::move(res_);
}

SystemOneResult evaluate_systemone(const SystemOnePlan& plan, Engine& engine, SessionCache* cache,
                                   int64_t n_ctx, int64_t chunk) {
  SystemOneEvaluation eval(plan, engine, cache, n_ctx, chunk);
  while (eval.step()) {
  }
  return eval.finish();
}

}  // namespace jitllm::app
