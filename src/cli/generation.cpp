// Generation for `jitllm run` and the chat REPL (see generation.h).
#include "cli/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <span>

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

std::vector<int32_t> generate(Engine& engine, Session& session, const Tokenizer& tok,
                              SamplerChain& sampler, const std::vector<int32_t>& tokens,
                              int n_predict, GenerationStats& stats,
                              const std::vector<int32_t>& stop_ids) {
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
  t0 = Clock::now();
  while (int(out.size()) < n_predict && !g_interrupt) {
    const int32_t next = picked >= 0 ? picked : sampler.sample(logits);
    if (tok.vocab().is_eog(next) ||
        std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end())
      break;
    sampler.accept(next);
    out.push_back(next);
    fmt::print("{}", stream.push(next));
    std::fflush(stdout);
    if (session.position() >= session.n_ctx()) {
      fmt::print(stderr, "\n[context of {} tokens is full]\n", session.n_ctx());
      break;
    }
    if (ids_only)
      picked = engine.decode_greedy(session, next);
    else
      logits = engine.decode(session, next);
  }
  fmt::print("{}", stream.finish());
  std::fflush(stdout);
  stats.gen_s += seconds_since(t0);
  stats.gen_tokens += int64_t(out.size());
  return out;
}

}  // namespace jitllm::cli
