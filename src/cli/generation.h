// Generation shared by `jitllm run` and its chat REPL: feed a prompt after the session's common
// prefix with it, sample, stream the text to stdout; Ctrl-C (SIGINT while installed) stops it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace jitllm {
class Engine;
class Session;
class Tokenizer;
class SamplerChain;
}  // namespace jitllm

namespace jitllm::cli {

// Set by SIGINT while an InterruptGuard is alive; generation stops at the next token.
extern std::atomic<bool> g_interrupt;

// Installs the SIGINT handler (no SA_RESTART: a blocked read returns at Ctrl-C) and restores the
// previous one when it goes.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct Saved;
  Saved* saved_;
};

struct GenerationStats {
  int64_t prompt_tokens = 0, gen_tokens = 0;
  double prompt_s = 0, gen_s = 0;
  void print() const;  // one line on stderr
};

// Where an answer stops besides end-of-generation tokens: token ids, and texts (llama.cpp's
// -r/--reverse-prompt, a chat template's turn end), which are never printed.
struct GenerationStops {
  std::vector<int32_t> ids;
  std::vector<std::string> texts;
};

// Feeds `tokens` after the session's common prefix with them (earlier KV is reused), samples up
// to n_predict tokens, streams their text to stdout. Stops at an end-of-generation token, at one
// of `stops`, at a full context (with a notice) or at Ctrl-C. Returns the generated ids (without
// the token that stopped it; with those of a stop text) and, in `text`, what was printed.
// Throws when the prompt does not fit the context.
std::vector<int32_t> generate(Engine& engine, Session& session, const Tokenizer& tok,
                              SamplerChain& sampler, const std::vector<int32_t>& tokens,
                              int n_predict, GenerationStats& stats,
                              const GenerationStops& stops = {}, std::string* text = nullptr);

}  // namespace jitllm::cli
