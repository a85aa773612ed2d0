// `jitllm run`: generate text from a prompt (-p / -f), streamed as it is produced, or chat
// interactively with the model's template (--chat). Speeds (prompt and generation tok/s) go to
// stderr at the end; --ids prints the generated ids on one line after the text.
// Chat input: a line ending in '\' continues on the next line; "/clear" starts over; Ctrl-C stops
// the current answer; Ctrl-D (end of input) exits.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "chat/content_guard.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "sample/sampler_chain.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::cli {
namespace {

std::atomic<bool> g_interrupt{false};
extern "C" void on_sigint(int) { g_interrupt = true; }

struct RunArgs {
  std::string model, prompt, prompt_file, system, kernels;
  std::string devices = "cpu";
  std::string vram_budget;
  int gpu_layers = -1;
  int n_predict = 128;
  int64_t n_ctx = 0;
  int threads = 0;
  bool chat = false, print_ids = false;
  SamplingParams sampling;
  uint32_t seed = SamplingParams::kRandomSeed;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Stats {
  int64_t prompt_tokens = 0, gen_tokens = 0;
  double prompt_s = 0, gen_s = 0;
  void print() const {
    fmt::print(stderr, "\nprompt: {} tokens in {:.3f} s ({:.1f} tok/s); generation: {} tokens in "
               "{:.3f} s ({:.1f} tok/s)\n",
               prompt_tokens, prompt_s, prompt_s > 0 ? double(prompt_tokens) / prompt_s : 0.0,
               gen_tokens, gen_s, gen_s > 0 ? double(gen_tokens) / gen_s : 0.0);
  }
};

// Feeds `tokens` after the session's common prefix with them (earlier KV is reused), samples up
// to n_predict tokens, streams their text to stdout. Returns the generated ids (without the
// end-of-generation token that stopped it).
std::vector<int32_t> generate(Engine& engine, Session& session, const Tokenizer& tok,
                              SamplerChain& sampler, const std::vector<int32_t>& tokens,
                              int n_predict, Stats& stats) {
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
    if (tok.vocab().is_eog(next)) break;
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

int run_chat(const RunArgs& args, Engine& engine, Session& session, const Tokenizer& tok,
             SamplerChain& sampler) {
  const ModelFile& file = engine.model().file();
  if (!file.metadata.has("tokenizer.chat_template"))
    throw_error("{}: the model has no chat template (tokenizer.chat_template); use -p instead",
                file.path);
  const auto tmpl = chat::ChatTemplate::from_metadata(file.metadata);
  // What the user types is message content: a control token spelled in it stays text.
  const std::vector<std::string> guarded = tok.parse_special_texts();
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!args.system.empty()) messages.push_back({{"role", "system"}, {"content", args.system}});
    session.clear();
  };
  reset();
  Stats stats;
  fmt::print(stderr, "chat with {} ({} layers); '\\' at a line end continues, /clear starts over, "
             "Ctrl-C stops an answer, Ctrl-D exits\n", engine.config().name, engine.config().n_layer);
  while (true) {
    fmt::print("\n> ");
    std::fflush(stdout);
    std::string text, line;
    bool got = false;
    while (std::getline(std::cin, line)) {
      got = true;
      if (!line.empty() && line.back() == '\\') {
        text += line.substr(0, line.size() - 1) + "\n";
        continue;
      }
      text += line;
      break;
    }
    if (!got || (g_interrupt && text.empty())) break;  // Ctrl-D (or Ctrl-C at the prompt)
    g_interrupt = false;
    if (text == "/clear") {
      reset();
      fmt::print(stderr, "[conversation cleared]\n");
      continue;
    }
    if (text.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", text}});
    const chat::GuardedPrompt prompt = chat::render_guarded(tmpl, messages, {}, guarded);
    const bool has_bos =
        !tmpl.bos_token().empty() && prompt.text.rfind(tmpl.bos_token(), 0) == 0;
    const std::vector<int32_t> ids =
        tok.encode_with_literals(prompt.text, /*add_special=*/!has_bos, prompt.literal_spans);
    const std::vector<int32_t> answer =
        generate(engine, session, tok, sampler, ids, args.n_predict, stats);
    if (g_interrupt) fmt::print(stderr, "\n[stopped]");
    g_interrupt = false;
    fmt::print("\n");
    messages.push_back({{"role", "assistant"}, {"content", tok.decode(answer)}});
  }
  stats.print();
  return 0;
}

int run_run(RunArgs args) {
  if (args.threads > 0) ThreadPool::set_global_threads(args.threads);
  if (!args.prompt.empty() && !args.prompt_file.empty())
    throw_error("give the prompt with -p or -f, not both");
  if (!args.prompt_file.empty()) {
    std::ifstream in(args.prompt_file, std::ios::binary);
    if (!in) throw_error("{}: cannot read the prompt file", args.prompt_file);
    std::stringstream ss;
    ss << in.rdbuf();
    args.prompt = ss.str();
  }
  if (!args.chat && args.prompt.empty()) throw_error("no prompt: give -p TEXT, -f FILE or --chat");
  if (args.n_predict < 0) throw_error("-n must be >= 0, got {}", args.n_predict);

  EngineOptions options;
  options.cpu_kernels = args.kernels;
  options.devices = args.devices;
  options.vram_budget = args.vram_budget;
  options.gpu_layers = args.gpu_layers;
  options.kv_tokens = args.n_ctx;  // 0: the training context, as the session
  Engine engine(load_model_file(args.model), options);
  const Tokenizer tok(engine.model().file().metadata);
  if (int64_t(tok.n_vocab()) > engine.config().n_vocab)
    throw_error("the tokenizer has {} tokens but the model only {} logits", tok.n_vocab(),
                engine.config().n_vocab);
  auto session = engine.new_session(args.n_ctx);
  args.sampling.seed = args.seed;
  // Ids past the tokenizer's last token (a padded head) are never sampled.
  SamplerChain sampler(args.sampling, int32_t(tok.n_vocab()));

  struct sigaction action {};
  action.sa_handler = on_sigint;  // no SA_RESTART: a blocked read returns at Ctrl-C
  struct sigaction old {};
  ::sigaction(SIGINT, &action, &old);
  struct Restore {
    struct sigaction* old;
    ~Restore() { ::sigaction(SIGINT, old, nullptr); }
  } restore{&old};

  if (args.chat) return run_chat(args, engine, *session, tok, sampler);

  const std::vector<int32_t> ids = tok.encode(args.prompt, /*add_special=*/true);
  fmt::print("{}", args.prompt);
  std::fflush(stdout);
  Stats stats;
  const std::vector<int32_t> out = generate(engine, *session, tok, sampler, ids, args.n_predict, stats);
  fmt::print("\n");
  if (args.print_ids) {
    std::string line;
    for (size_t i = 0; i < out.size(); ++i) line += (i ? " " : "") + std::to_string(out[i]);
    fmt::print("{}\n", line);
  }
  stats.print();
  if (sampler.params().temperature > 0)
    fmt::print(stderr, "seed: {}\n", sampler.seed());
  return 0;
}

const RegisterCommand reg{Command{
    "run", "Generate text from a prompt, or chat with --chat",
    [](CLI::App& app) -> std::function<int()> {
      auto a = std::make_shared<RunArgs>();
      app.add_option("-m,--model", a->model, "Model: .gguf, .jlm or HF folder (default: models/demo)");
      app.add_option("-p,--prompt", a->prompt, "Prompt text");
      app.add_option("-f,--file", a->prompt_file, "Read the prompt from a file");
      app.add_option("-n,--n-predict", a->n_predict, "Tokens to generate (default 128)");
      app.add_option("--temp", a->sampling.temperature, "Temperature (<= 0: greedy; default 0.8)");
      app.add_option("--top-k", a->sampling.top_k, "Top-k (<= 0 off; default 40)");
      app.add_option("--top-p", a->sampling.top_p, "Top-p (>= 1 off; default 0.95)");
      app.add_option("--min-p", a->sampling.min_p, "Min-p (<= 0 off; default 0.05)");
      app.add_option("--repeat-penalty", a->sampling.repeat_penalty, "Repeat penalty (1 = off)");
      app.add_option("--seed", a->seed, "Sampling seed (default: random, printed)");
      app.add_option("-c,--ctx-size", a->n_ctx, "Context size (default: the model's)");
      app.add_option("-t,--threads", a->threads, "Threads (default: all cores)");
      app.add_option("--kernels", a->kernels, "CPU kernels: jit or reference");
      add_device_flags(app, a->devices, a->vram_budget, a->gpu_layers);
      app.add_flag("--chat", a->chat, "Interactive chat with the model's template");
      app.add_option("--system", a->system, "System message for --chat");
      app.add_flag("--ids", a->print_ids, "Print the generated token ids after the text");
      return [a] { return run_run(*a); };
    }}};

}  // namespace
}  // namespace jitllm::cli
