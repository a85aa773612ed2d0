// `jitllm run`: generate text from a prompt (-p / -f), streamed as it is produced, or chat
// interactively (--chat: cli/chat_repl.h). Speeds (prompt and generation tok/s) go to stderr at
// the end; --ids prints the generated ids on one line after the text.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/chat_repl.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "cli/generation.h"
#include "cli/line_reader.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/attention_flags.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "sample/sampler_chain.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::cli {
namespace {

struct RunArgs {
  std::string model, prompt, prompt_file, system, chat_template, kernels;
  std::string devices = "cpu";
  std::string vram_budget;
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
  int n_predict = 128;
  int64_t n_ctx = 0;
  int threads = 0;
  bool chat = false, print_ids = false;
  SamplingParams sampling;
  uint32_t seed = SamplingParams::kRandomSeed;
  AttentionFlags attention;
  std::vector<std::string> reverse_prompts;  // -r: generation stops before one of these texts
};

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
  for (const std::string& r : args.reverse_prompts)
    if (r.empty()) throw_error("-r/--reverse-prompt: the text to stop at is empty");
  if (args.chat && !args.prompt.empty()) throw_error("--chat reads the conversation from the input; not -p or -f");
  if (!args.chat && (!args.chat_template.empty() || !args.system.empty()))
    throw_error("--chat-template and --system are for --chat");
  if (args.n_predict < 0) throw_error("-n must be >= 0, got {}", args.n_predict);

  EngineOptions options;
  options.cpu_kernels = args.kernels;
  options.devices = args.devices;
  options.vram_budget = args.vram_budget;
  options.host_budget = args.host_budget;
  options.gpu_layers = args.gpu_layers;
  options.kv_tokens = args.n_ctx;  // 0: the training context, as the session
  options.kv_type = kv_cache_type(args.attention.cache_type_k, args.attention.cache_type_v);
  check_flash_attn(args.attention.flash_attn);
  Engine engine(load_model_file(args.model), options);
  const Tokenizer tok(engine.model().file().metadata);
  if (int64_t(tok.n_vocab()) > engine.config().n_vocab)
    throw_error("the tokenizer has {} tokens but the model only {} logits", tok.n_vocab(),
                engine.config().n_vocab);
  auto session = engine.new_session(args.n_ctx);
  args.sampling.seed = args.seed;
  // Ids past the tokenizer's last token (a padded head) are never sampled.
  SamplerChain sampler(args.sampling, int32_t(tok.n_vocab()));

  const InterruptGuard interrupts;
  if (args.chat) {
    ChatOptions chat;
    chat.system = args.system;
    chat.chat_template = args.chat_template;
    chat.history_file = LineReader::default_history_file();
    chat.n_predict = args.n_predict;
    chat.stop_texts = args.reverse_prompts;
    return run_chat(chat, engine, *session, tok, sampler);
  }

  const std::vector<int32_t> ids = tok.encode(args.prompt, /*add_special=*/true);
  fmt::print("{}", args.prompt);
  std::fflush(stdout);
  GenerationStats stats;
  GenerationStops stops;
  stops.texts = args.reverse_prompts;
  const std::vector<int32_t> out =
      generate(engine, *session, tok, sampler, ids, args.n_predict, stats, stops);
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
      app.add_option("-s,--seed", a->seed, "Sampling seed (default: random, printed)");
      app.add_option("-c,--ctx-size", a->n_ctx, "Context size (default: the model's)");
      app.add_option("-t,--threads", a->threads, "Threads (default: all cores)");
      app.add_option("--kernels", a->kernels, "CPU kernels: jit or reference");
      add_device_flags(app, a->devices, a->vram_budget, a->gpu_layers, a->host_budget);
      add_attention_flags(app, a->attention);
      app.add_option("-r,--reverse-prompt", a->reverse_prompts,
                     "stop before this text (not printed); repeat for several");
      app.add_flag("--chat", a->chat, "Interactive chat with the model's template (/help in it)");
      app.add_option("--system", a->system, "System message for --chat");
      app.add_option("--chat-template", a->chat_template,
                     "template for --chat: a Jinja file or a built-in name (chatml, qwen, llama3, "
                     "gemma, mistral, phi3; default: the model's)");
      app.add_flag("--ids", a->print_ids, "Print the generated token ids after the text");
      return [a] { return run_run(*a); };
    }}};

}  // namespace
}  // namespace jitllm::cli
