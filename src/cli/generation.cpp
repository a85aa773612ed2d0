// Generation for `jitllm run` and the chat REPL (see generation.h).
#include "cli/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <span>
#include <string>
#include <utility>

#include "core/error.h"
#include "runtime/engine.h"
#include "sample/sampler_chain.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::cli {

std::atomic<bool> g_interrupt{false};

namespace {

extern "C" void on_sigint(int) { g_interrupt = true; }

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

struct InterruptGuard::Saved {
  struct sigaction old {};
};

InterruptGuard::InterruptGuard() : saved_(new Saved) {
  struct sigaction action {};
  action.sa_handler = on_sigint;
  ::sigaction(SIGINT, &action, &saved_->old);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &saved_->old, nullptr);
  delete saved_;
}

void GenerationStats::print() const {
  fmt::print(stderr, "\nprompt: {} tokens in {:.3f} s ({:.1f} tok/s); generation: {} tokens in "
             "{:.3f} s ({:.1f} tok/s)\n",
             prompt_tokens, prompt_s, prompt_s > 0 ? double(prompt_tokens) / prompt_s : 0.0,
             gen_tokens, gen_s, gen_s > 0 ? double(gen_tokens) / gen_s : 0.0);
}

namespace {

// Text that may be the start of a stop text is held back until it is known not to be one, so a
// stop text is never printed, not even in part.
class TextStops {
 public:
  explicit TextStops(const std::vector<std::string>& stops) : stops_(stops) {
    for (const std::string& s : stops_)
      if (s.empty()) throw_error("an empty stop text");
  }

  // Adds `piece`; returns the text that can be shown now. Sets `stopped` when a stop text is
  // complete (the text before it is returned, the rest dropped).
  std::string push(const std::string& piece, bool& stopped) {
    held_ += piece;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
    if (cut != std::string::npos) {
      stopped = true;
      std::string shown = held_.substr(0, cut);
      held_.clear();
      return shown;
    }
    size_t keep = 0;  // the longest end of held_ that begins a stop text
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
        if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
    std::string shown = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return shown;
  }
  std::string finish() { return std::exchange(held_, {}); }

 private:
  const std::vector<std::string>& stops_;
  std::string held_;
};

}  // namespace

std::vector<int32_t> generate(Engine& engine, Session& session, const Tokenizer& tok,
                              SamplerChain& sampler, const std::vector<int32_t>& tokens,
                              int n_predict, GenerationStats& stats, const GenerationStops& stops,
                              std::string* text) {
  size_t common = 0;
  const auto& have = session.tokens();
  while (common < have.size() && common < tokens.size() && have[common] == tokens[common]) ++common;
  if (common == tokens.size() && common > 0) --common;  // re-run the last token for its logits
  session.truncate(int64_t(common));
  const std::span<const int32_t> fresh(tokens.data() + common, tokens.size() - common);
  if (session.position() + int64_t(fresh.size()) >= session.n_ctx())
    throw_error("the prompt ({} tokens) does not fit the context of {} tokens (-c)",
                tokens.size(), session.n_ctx());
  auto t0 = Clock::now();
  std::vector<float> logits = engine.prefill(session, fresh, false);
  stats.prompt_s += seconds_since(t0);
  stats.prompt_tokens += int64_t(fresh.size());

  sampler.reset();
  for (int32_t t : tokens) sampler.accept(t);
  // The decoder sees the prompt first (its text discarded) so the first generated token is not
  // treated as the start of the text (SPM would drop its leading space).
  StreamDecoder stream(tok);
  for (int32_t t : tokens) stream.push(t);
  std::vector<int32_t> out;
  // Plain greedy sampling (temperature <= 0, no penalties or logit bias) needs only the argmax:
  // the engine brings home the token id instead of the logits (on a card the pick runs there).
  const SamplingParams& sp = sampler.params();
  const bool ids_only = sp.temperature <= 0 && sp.logit_bias.empty() && sp.repeat_penalty == 1.0f &&
                        sp.presence_penalty == 0.0f && sp.frequency_penalty == 0.0f;
  int32_t picked = -1;  // the engine's greedy pick for the next token (ids_only)
  TextStops text_stops(stops.texts);
  std::string shown;
  auto show = [&](const std::string& s) {
    fmt::print("{}", s);
    std::fflush(stdout);
    shown += s;
  };
  bool stopped = false;
  t0 = Clock::now();
  while (int(out.size()) < n_predict && !g_interrupt) {
    const int32_t next = picked >= 0 ? picked : sampler.sample(logits);
    if (tok.vocab().is_eog(next) ||
        std::find(stops.ids.begin(), stops.ids.end(), next) != stops.ids.end())
      break;
    sampler.accept(next);
    out.push_back(next);
    show(text_stops.push(stream.push(next), stopped));
    if (stopped) break;
    if (session.position() >= session.n_ctx()) {
      fmt::print(stderr, "\n[context of {} tokens is full]\n", session.n_ctx());
      break;
    }
    if (ids_only)
      picked = engine.decode_greedy(session, next);
    else
      logits = engine.decode(session, next);
  }
  if (!stopped) show(text_stops.push(stream.finish(), stopped));
  if (!stopped) show(text_stops.finish());
  if (text) *text = std::move(shown);
  stats.gen_s += seconds_since(t0);
  stats.gen_tokens += int64_t(out.size());
  return out;
}

}  // namespace jitllm::cli
