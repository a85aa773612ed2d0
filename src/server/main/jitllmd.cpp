// jitllmd: the server daemon. `jitllmd serve -load MODEL [-id NAME] [-models DIR] ...` (options
// take one or two dashes). SIGTERM / SIGINT drain the requests in flight and exit 0. Only the
// argument parsing and signal handling live here; the server is src/server/http_server.h.
#include <fmt/format.h>
#include <signal.h>

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "server/http_server.h"

namespace {

using jitllm::server::HttpServer;
using jitllm::server::ModelOptions;
using jitllm::server::ServerOptions;

const char* const kUsage = R"(usage: jitllmd serve [options]
  -load MODEL         model to serve: .gguf, .jlm or Hugging Face folder (default: models/demo)
  -id NAME            the name clients use for it (default: the file name without extension)
  -models DIR         also serve every .gguf / .jlm in DIR (named by file stem)
  -chat-template FILE Jinja chat template for -load (default: the model's; ChatML-like if none)
  -devices DEV        cpu (default), cuda (every card), cuda:N or a list (cuda:0,cuda:1);
                      layers that do not fit on the cards run on the host
  -vram-budget SIZE   most memory to use per card, e.g. 6G, or one per card: 6G,4G
  -gpu-layers N       at most N layers on the cards, the first ones (default: all that fit)
  -host ADDR          address to bind (default 127.0.0.1)
  -port N             port (default 8080; 0 = any free port, see -port-file)
  -port-file FILE     write the bound port here once listening
  -parallel N         sequences decoded together per model (default 4)
  -max-seq N          context per sequence in tokens (default: the model's)
  -cache N            finished sessions kept for prefix reuse per model (default 8)
  -prefill-chunk N    prompt tokens per step; prefixes are reused in multiples of it (default 64)
  -api-key KEY        require "Authorization: Bearer KEY" (also $JITLLM_API_KEY)
  -max-body BYTES     largest request body accepted (default 4194304)
  -threads N          compute threads (default: all cores)
  -kernels NAME       CPU kernels: jit (default) or reference
  -drain-timeout S    seconds SIGTERM waits for requests in flight, then cancels them (default 120)
  -header-timeout S   a request's line and headers must arrive within S seconds (default 10)
  -body-timeout S     its body within S seconds after the headers (default 60)
  -client-connections N  connections one client address may have still sending a request; one
                      more closes its oldest (default 8)
)";

// Every option takes a value; the names are checked before the values, so a mistyped flag is
// reported as unknown, not as one that lacks a value.
const char* const kOptions[] = {
    "load",    "id",       "models",       "chat-template", "devices",    "vram-budget",
    "gpu-layers", "host",  "port",         "port-file",     "parallel",   "max-seq",
    "cache",   "prefill-chunk", "api-key", "max-body",      "threads",    "kernels",
    "drain-timeout", "header-timeout", "body-timeout", "client-connections"};

long to_int(const std::string& name, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < lo || x > hi)
    jitllm::throw_error("-{}: expected an integer in [{}, {}], got '{}'", name, lo, hi, v);
  return x;
}

int serve(const std::map<std::string, std::string>& args) {
  ServerOptions so;
  ModelOptions mo;
  std::string models_dir;
  int threads = 0;
  for (const auto& [k, v] : args) {
    if (k == "load") mo.path = v;
    else if (k == "id") mo.id = v;
    else if (k == "models") models_dir = v;
    else if (k == "chat-template") mo.chat_template_file = v;
    else if (k == "devices") mo.devices = v;
    else if (k == "vram-budget") mo.vram_budget = v;
    else if (k == "gpu-layers") mo.gpu_layers = int(to_int(k, v, 0, 1 << 20));
    else if (k == "host") so.host = v;
    else if (k == "port") so.port = int(to_int(k, v, 0, 65535));
    else if (k == "port-file") so.port_file = v;
    else if (k == "parallel") mo.scheduler.parallel = int(to_int(k, v, 1, 256));
    else if (k == "max-seq") mo.scheduler.n_ctx = to_int(k, v, 1, 1L << 24);
    else if (k == "cache") mo.scheduler.cache_sessions = size_t(to_int(k, v, 0, 4096));
    else if (k == "prefill-chunk") mo.scheduler.prefill_chunk = to_int(k, v, 1, 1 << 16);
    else if (k == "api-key") so.api_key = v;
    else if (k == "max-body") so.max_body_bytes = size_t(to_int(k, v, 1, 1L << 30));
    else if (k == "threads") threads = int(to_int(k, v, 1, 1024));
    else if (k == "kernels") mo.kernels = v;
    else if (k == "drain-timeout") so.drain_timeout_s = int(to_int(k, v, 0, 86400));
    else if (k == "header-timeout") so.connection.header_timeout_ms = int(to_int(k, v, 1, 3600)) * 1000;
    else if (k == "body-timeout") so.connection.body_timeout_ms = int(to_int(k, v, 1, 86400)) * 1000;
    else if (k == "client-connections") so.connection.reading_per_client = int(to_int(k, v, 1, 4096));
    else jitllm::throw_error("unknown option -{}\n{}", k, kUsage);
  }
  if (so.api_key.empty())
    if (const char* env = std::getenv("JITLLM_API_KEY"); env && *env) so.api_key = env;
  if (threads > 0) jitllm::ThreadPool::set_global_threads(threads);

  std::vector<ModelOptions> models;
  if (!mo.path.empty() || models_dir.empty()) models.push_back(mo);
  if (!models_dir.empty()) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(models_dir)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".gguf" || ext == ".jlm")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) jitllm::throw_error("-models {}: no .gguf or .jlm files", models_dir);
    for (const auto& f : files) {
      if (!mo.path.empty() && std::filesystem::equivalent(f, mo.path)) continue;
      ModelOptions m = mo;
      m.path = f;
      m.id.clear();
      m.chat_template_file.clear();
      m.skip_if_unloadable = true;
      models.push_back(m);
    }
  }

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
  // run() returned because stop() ran (from a signal); the watcher is done or about to be.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Each HTTP thread would otherwise grow its own malloc arena and keep it: 16 large chats left
  // 2.35 GB resident, 172 MB with one arena. A few arenas keep the threads from contending.
  mallopt(M_ARENA_MAX, 4);
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.empty() || a[0] == "-h" || a[0] == "--help" || a[0] == "help") {
    fmt::print("{}", kUsage);
    return a.empty() ? 2 : 0;
  }
  if (a[0] != "serve") {
    fmt::print(stderr, "jitllmd: unknown command '{}'\n{}", a[0], kUsage);
    return 2;
  }
  try {
    std::map<std::string, std::string> args;
    for (size_t i = 1; i < a.size(); ++i) {
      std::string k = a[i];
      if (k == "-h" || k == "--help") {
        fmt::print("{}", kUsage);
        return 0;
      }
      if (k.size() < 2 || k[0] != '-') jitllm::throw_error("unexpected argument '{}'", k);
      k.erase(0, k[1] == '-' ? 2 : 1);
      std::string v;
      const size_t eq = k.find('=');
      const std::string name = k.substr(0, eq);
      if (std::find(std::begin(kOptions), std::end(kOptions), name) == std::end(kOptions))
        jitllm::throw_error("unknown option -{}\n{}", name, kUsage);
      if (eq != std::string::npos) {
        v = k.substr(eq + 1);
        k.resize(eq);
      } else {
        if (i + 1 >= a.size()) jitllm::throw_error("-{} needs a value", k);
        v = a[++i];
      }
      args[k] = v;
    }
    return serve(args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "jitllmd: {}\n", e.what());
    return 1;
  }
}
