// jitllmd: the server daemon. `jitllmd serve -m MODEL [--alias NAME] [--models-dir DIR] ...`,
// GNU long flags with llama-server's names and short forms (-m, -c, -np, -ngl, -t); the old
// single-dash long names (-load, -parallel) still work for one release, with a deprecation note.
// SIGTERM / SIGINT drain the requests in flight and exit 0. Only the argument parsing and signal
// handling live here; the server is src/server/http_server.h.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/flag_spelling.h"
#include "core/log.h"
#include "core/suggest.h"
#include "core/thread_pool.h"
#include "core/tuning.h"
#include "core/version.h"
#include "server/http_server.h"

namespace {

using jitllm::server::HttpServer;
using jitllm::server::ModelOptions;
using jitllm::server::ServerOptions;

struct Args {
  ServerOptions server;
  ModelOptions model;
  std::string models_dir;
  int threads = 0;
  int header_timeout_s = 10, body_timeout_s = 60;
  std::string log_format = "text", log_level;  // level "": JITLLM_LOG if set, else info
  std::string reasoning_format = "auto";
};

void add_serve_options(CLI::App& app, Args& a) {
  ModelOptions& mo = a.model;
  ServerOptions& so = a.server;
  app.add_option("-m,--model,--load", mo.path,
                 "model to serve: .gguf, .jlm or Hugging Face folder (default: models/demo)");
  app.add_option("-a,--alias,--id", mo.id, "the name clients use for it (default: the file stem)");
  app.add_option("--models-dir,--models", a.models_dir,
                 "also serve every .gguf / .jlm in DIR (named by file stem; files that do not "
                 "load are skipped)");
  app.add_option("--chat-template", mo.chat_template,
                 "chat template for --model: a Jinja file or a built-in name (chatml, qwen, llama3, gemma, "
                 "mistral, phi3; default: the model's, ChatML-like if none)");
  app.add_option("--reasoning-format", a.reasoning_format,
                 "where a thinking model's thoughts go: auto (default: reasoning_content when "
                 "the template thinks), deepseek (always look for <think>), none (in content)")
      ->check(CLI::IsMember({"none", "deepseek", "auto"}));
  app.add_option("--devices", mo.devices,
                 "cpu (default), cuda (every card), cuda:N or a list (cuda:0,cuda:1); layers that "
                 "do not fit on the cards run on the host");
  app.add_option("--vram-budget", mo.vram_budget, "most memory per card, e.g. 6G, or 6G,4G");
  app.add_option("--host-budget", mo.host_budget,
                 "most host memory for the model with --devices cpu, e.g. 6G (default: what the "
                 "machine can spare); MoE experts that do not fit are paged from disk");
  app.add_option("--n-gpu-layers,--gpu-layers", mo.gpu_layers,
                 "at most N layers on the cards, the first ones (-ngl; default: all that fit)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--flash-attn", mo.flash_attn,
                 "-fa: on or auto (jitllm's attention is always fused); off is refused")
      ->expected(0, 1);
  app.add_option("--cache-type-k", mo.cache_type_k, "-ctk: KV cache type, f16 (default) or f32");
  app.add_option("--cache-type-v", mo.cache_type_v, "-ctv: the same as -ctk (K and V share one type)");
  app.add_option("--host", so.host, "address to bind (default 127.0.0.1)");
  app.add_option("--port", so.port, "port (default 8080; 0: any free port, see --port-file)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--port-file", so.port_file, "write the bound port here once listening");
  app.add_option("--parallel", mo.scheduler.parallel,
                 "sequences decoded together per model (-np; default 4)")
      ->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx-size,--max-seq", mo.scheduler.n_ctx,
                 "context per sequence in tokens (default: the model's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--kv-tokens", mo.kv_tokens,
                 "KV cache size in tokens, shared by every sequence in pages as they grow "
                 "(default: --parallel plus --cache-sessions sequences at their context, at most "
                 "4096 tokens each, and at least one whole context); a full cache parks the "
                 "sequences admitted last")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 32));
  app.add_flag("--deterministic", mo.scheduler.deterministic,
               "batch-invariant steps: a sequence's greedy answer does not depend on what it is "
               "batched with (CPU: steps of at most 63 rows); slower");
  app.add_option("--cache-sessions,--cache", mo.scheduler.cache_sessions,
                 "finished sessions kept for prefix reuse per model (default 8)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--batch-size", mo.scheduler.step_prefill_tokens,
                 "prompt tokens one step takes across the arriving requests, beside the decoding "
                 "ones (default 256; at least one chunk always runs)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--prefill-chunk", mo.scheduler.prefill_chunk,
                 "prompt tokens per step; prefixes are reused in multiples of it (default 64)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--api-key", so.api_key,
                 "require \"Authorization: Bearer KEY\" (also $JITLLM_API_KEY)");
  app.add_option("--max-body", so.max_body_bytes,
                 "largest request body accepted, after decoding (default 4194304)")
      ->check(CLI::Range(size_t(1), size_t(1) << 30));
  app.add_option("-t,--threads", a.threads, "compute threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--kernels", mo.kernels, "CPU kernels: jit (default) or reference");
  app.add_option("--pooling", mo.pooling,
                 "how /v1/embeddings pools a text's hidden states: mean, cls or last (default: "
                 "the model's pooling_type)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  app.add_option("--drain-timeout", so.drain_timeout_s,
                 "seconds SIGTERM waits for requests in flight, then cancels them (default 120)")
      ->check(CLI::Range(0, 86400));
  app.add_option("--header-timeout", a.header_timeout_s,
                 "a request's line and headers must arrive within S seconds (default 10)")
      ->check(CLI::Range(1, 3600));
  app.add_option("--body-timeout", a.body_timeout_s,
                 "its body within S seconds after the headers (default 60)")
      ->check(CLI::Range(1, 86400));
  app.add_option("--client-connections", so.connection.reading_per_client,
                 "connections one client address may have still sending a request; one more "
                 "closes its oldest (default 8)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--cors", so.cors_origins,
                 "origins browsers may call from, comma-separated, or '*' (default: none)")
      ->delimiter(',');
  app.add_option("--log-format", a.log_format, "text (default) or json, one object per line")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", a.log_level,
                 "debug, info (default; JITLLM_LOG when set), warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
}

std::vector<ModelOptions> models_of(const Args& a) {
  std::vector<ModelOptions> models;
  if (!a.model.path.empty() || a.models_dir.empty()) models.push_back(a.model);
  if (a.models_dir.empty()) return models;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(a.models_dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".gguf" && ext != ".jlm") continue;
    // A link loop or a dangling link fails the status call: that entry is skipped, not the server.
    std::error_code entry_ec;
    if (e.is_regular_file(entry_ec)) {
      files.push_back(e.path());
    } else {
      jitllm::log(jitllm::LogLevel::Warn, "--models-dir: skipping {}: {}", e.path().string(),
                  entry_ec ? entry_ec.message() : std::string("not a regular file"));
    }
  }
  if (ec) jitllm::throw_error("--models-dir {}: {}", a.models_dir, ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) jitllm::throw_error("--models-dir {}: no .gguf or .jlm files", a.models_dir);
  for (const auto& f : files) {
    if (!a.model.path.empty() && std::filesystem::equivalent(f, a.model.path, ec)) continue;
    ModelOptions m = a.model;
    m.path = f;
    m.id.clear();
    m.chat_template.clear();
    m.skip_if_unloadable = true;
    models.push_back(m);
  }
  return models;
}

int serve(Args& a) {
  ServerOptions& so = a.server;
  so.connection.header_timeout_ms = a.header_timeout_s * 1000;
  so.connection.body_timeout_ms = a.body_timeout_s * 1000;
  if (so.api_key.empty())
    if (const char* env = std::getenv("JITLLM_API_KEY"); env && *env) so.api_key = env;
  if (a.threads > 0) jitllm::ThreadPool::set_global_threads(a.threads);
  a.model.reasoning_format =
      jitllm::server::parse_reasoning_format(a.reasoning_format, "--reasoning-format");
  const std::vector<ModelOptions> models = models_of(a);

  // Signals go to one thread that starts the drain; every other thread blocks them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  HttpServer server(so, models);
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != 0) server.stop();
  });
  int rc = 0;
  try {
    rc = server.run();
  } catch (...) {
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    throw;
  }
  // run() returned because stop() ran (from a signal) or loading failed; end the watcher.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return rc;
}

// The long names of `app`'s options (for the old single-dash spellings and "did you mean").
std::vector<std::string> long_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back(n);
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  // Each HTTP thread would otherwise grow its own malloc arena and keep it: 16 large chats left
  // 2.35 GB resident, 172 MB with one arena. A few arenas keep the threads from contending.
  mallopt(M_ARENA_MAX, 4);
  Args a;
  CLI::App app{"jitllmd: an OpenAI-compatible server for jitllm's engine"};
  app.set_version_flag("--version", std::string("jitllmd ") + jitllm::version_text());
  app.require_subcommand(1);
  CLI::App* serve_cmd = app.add_subcommand("serve", "serve models over HTTP");
  add_serve_options(*serve_cmd, a);

  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "serve") {
    const std::string near = jitllm::closest_name(argv[1], {"serve"});
    fmt::print(stderr, "jitllmd: unknown command '{}'{}\nRun with --help for the commands.\n",
               argv[1], near.empty() ? "" : " (did you mean serve?)");
    return 2;
  }
  const jitllm::FlagSpelling spelled = jitllm::respell_flags(
      argc, argv,
      {{"ngl", "n-gpu-layers"}, {"np", "parallel"}, {"fa", "flash-attn"}, {"ctk", "cache-type-k"},
       {"ctv", "cache-type-v"}},
      long_names(*serve_cmd));
  std::vector<const char*> args;
  for (const std::string& s : spelled.args) args.push_back(s.c_str());
  try {
    app.parse(int(args.size()), const_cast<char**>(args.data()));
  } catch (const CLI::ParseError& e) {
    if (const auto* extra = dynamic_cast<const CLI::ExtrasError*>(&e)) {
      // CLI11 2.1 names the extras without a suggestion: add the nearest flag or command.
      std::string what = extra->what(), hint;
      for (const std::string& s : spelled.args) {
        if (what.find(s) == std::string::npos || s.empty()) continue;
        const bool flag = s.rfind("--", 0) == 0;
        const std::string bare = s.substr(flag ? 2 : (s[0] == '-' ? 1 : 0));
        const std::string near = jitllm::closest_name(
            bare.substr(0, bare.find('=')),
            flag || s[0] == '-' ? long_names(*serve_cmd) : std::vector<std::string>{"serve"});
        if (!near.empty()) hint = fmt::format(" (did you mean {}{}?)", flag || s[0] == '-' ? "--" : "", near);
        break;
      }
      fmt::print(stderr, "jitllmd: {}{}\nRun with --help for the options.\n", what, hint);
      return 2;
    }
    return app.exit(e);
  }
  for (const std::string& w : spelled.warnings) fmt::print(stderr, "jitllmd: {}\n", w);
  try {
    // A server says what it does (startup, one line per request) unless told otherwise.
    if (!a.log_level.empty() || !jitllm::tuning::core_knobs().log.is_set())
      jitllm::set_log_threshold(a.log_level == "debug"  ? jitllm::LogLevel::Debug
                                : a.log_level == "warn" ? jitllm::LogLevel::Warn
                                : a.log_level == "error" ? jitllm::LogLevel::Error
                                                         : jitllm::LogLevel::Info);
    jitllm::set_log_format(a.log_format == "json" ? jitllm::LogFormat::Json : jitllm::LogFormat::Text);
    return serve(a);
  } catch (const std::exception& e) {
    fmt::print(stderr, "jitllmd: {}\n", e.what());
    return 1;
  }
}
