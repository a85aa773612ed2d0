// `jitllm speed -m MODEL -p 512 -n 128 -r R [-t N] [--ttft] [--devices cpu] [--kernels K]`:
// prefill and decode throughput on fresh sessions, printed as `pp512: X tok/s` / `tg128: Y tok/s`
// lines (what bench/ab's `auto` parser reads), plus bytes read per decoded token, the GB/s that
// implies, and that as a share of a read-bandwidth wall measured here in the same process.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "runtime/read_wall.h"

namespace jitllm::cli {
namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct SpeedOptions {
  std::string model;
  int prompt = 512, gen = 128, reps = 3, threads = 0;
  bool ttft = false;
  bool logits = false;  // decode reads every step's logits (the path before the greedy hook)
  std::string devices = "cpu";
  std::string vram_budget;
  int gpu_layers = -1;
  std::string kernels = "jit";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run_speed(const SpeedOptions& o) {
  if (o.prompt < 0 || o.gen < 0 || o.reps < 1) throw_error("-p, -n must be >= 0 and -r >= 1");
  const auto t_start = Clock::now();
  if (o.threads > 0) ThreadPool::set_global_threads(o.threads);
  ThreadPool& pool = ThreadPool::global();

  const auto t_open0 = Clock::now();
  std::shared_ptr<const ModelFile> file = load_model_file(o.model);
  const auto t_open1 = Clock::now();
  EngineOptions eo;
  eo.cpu_kernels = o.kernels;
  eo.devices = o.devices;
  eo.vram_budget = o.vram_budget;
  eo.gpu_layers = o.gpu_layers;
  eo.kv_tokens = int64_t(o.prompt) + o.gen + 8;  // one session at a time
  eo.print_placement = false;  // printed with the results
  eo.n_batch = std::max(1, o.prompt);
  Engine engine(file, eo);
  const auto t_engine = Clock::now();
  const int64_t n_vocab = engine.config().n_vocab;
  const int64_t n_ctx = int64_t(o.prompt) + o.gen + 8;

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
  auto prompt_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& v : t) v = tok(rng);
    return t;
  };

  if (o.ttft) {
    // A cold first prompt on this engine: the first step also emits the kernels it needs.
    auto s = engine.new_session(n_ctx);
    const auto p = prompt_tokens(std::max(1, o.prompt));
    const auto t0 = Clock::now();
    auto logits = engine.prefill(*s, p, false);
    const auto t1 = Clock::now();
    const int32_t first = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const auto t2 = Clock::now();
    fmt::print("load: open {:.3f} s, engine {:.3f} s\n", secs(t_open0, t_open1), secs(t_open1, t_engine));
    fmt::print("ready (process start to engine ready): {:.3f} s\n", secs(t_start, t_engine));
    fmt::print("first token {} after prefill of {} tokens: {:.3f} s (sample {:.6f} s)\n", first,
               p.size(), secs(t0, t2), secs(t1, t2));
    fmt::print("ready-to-first-token: {:.3f} s\n", secs(t_engine, t2));
  }

  // Warm-up: page the weights in and emit every kernel before timing.
  {
    auto s = engine.new_session(n_ctx);
    if (o.prompt > 0) engine.prefill(*s, prompt_tokens(std::min(o.prompt, 64)), false);
    engine.decode(*s, 1);
    engine.decode_greedy(*s, 1);
  }
  std::vector<double> pp, tg;
  for (int r = 0; r < o.reps; ++r) {
    if (o.prompt > 0) {
      auto s = engine.new_session(n_ctx);
      const auto p = prompt_tokens(o.prompt);
      const auto t0 = Clock::now();
      engine.prefill(*s, p, false);
      pp.push_back(double(o.prompt) / secs(t0, Clock::now()));
    }
    if (o.gen > 0) {
      // As llama-bench's tg: generation from an empty context, one token per step.
      auto s = engine.new_session(n_ctx);
      int32_t t = 1;
      const auto t0 = Clock::now();
      for (int i = 0; i < o.gen; ++i) {
        if (o.logits) {  // every step's logits come home and the host picks
          const auto logits = engine.decode(*s, t);
          t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        } else {  // only the greedy token comes home (on a card: the pick runs there)
          t = engine.decode_greedy(*s, t);
        }
      }
      tg.push_back(double(o.gen) / secs(t0, Clock::now()));
    }
  }
  fmt::print("model: {} ({}), devices: {}, kernels: {}, threads: {}\n", file->path,
             engine.config().n_layer, eo.devices, engine.cpu_kernels_name(), pool.size());
  if (o.devices != "cpu") fmt::print("{}", engine.placement().table());
  {  // what one position costs in the cache (each layer's widths: MLA keeps its latent)
    const KvLayout& kv = engine.kv_pool().layout();
    fmt::print("KV per token: {} bytes ({})\n", kv.page_bytes() / size_t(kv.page_tokens),
               kv.type == QuantType::F32 ? "f32" : "f16");
  }
  auto list = [](const std::vector<double>& v) {
    std::string s;
    for (double x : v) s += fmt::format("{}{:.2f}", s.empty() ? "" : " ", x);
    return s;
  };
  if (!pp.empty()) fmt::print("pp{}: {:.2f} tok/s  (runs: {})\n", o.prompt, median(pp), list(pp));
  if (!tg.empty()) {
    const double tps = median(tg);
    const double bpt = weight_bytes_per_token(*file);
    const double gbs = bpt * tps / 1e9;
    const ReadWall wall = measure_read_wall(o.devices);
    fmt::print("tg{}: {:.2f} tok/s  (runs: {})\n", o.gen, tps, list(tg));
    fmt::print("decode: {:.1f} MB read per token, {:.1f} GB/s = {:.0f}% of the {:.1f} GB/s read wall "
               "measured with {}\n",
               bpt / 1e6, gbs, 100.0 * gbs / wall.gbs, wall.gbs, wall.how);
  }
  return 0;
}

const RegisterCommand kRegister{Command{
    "speed", "Prefill / decode throughput of a model (llama-bench style pp/tg)",
    [](CLI::App& app) -> std::function<int()> {
      auto o = std::make_shared<SpeedOptions>();
      app.add_option("-m,--model", o->model, "model file (.gguf / .jlm)")->required();
      app.add_option("-p,--prompt", o->prompt, "prompt tokens per prefill (default 512)");
      app.add_option("-n,--gen", o->gen, "decoded tokens (default 128)");
      app.add_option("-r,--reps", o->reps, "repetitions, the median is printed (default 3)");
      app.add_option("-t,--threads", o->threads, "threads (default: JITLLM_CORES or all cores)");
      app.add_flag("--ttft", o->ttft, "print load, ready and time-to-first-token phases");
      app.add_flag("--logits", o->logits,
                   "decode brings every step's logits home and picks there (default: greedy "
                   "token ids only, picked where the model runs)");
      add_device_flags(app, o->devices, o->vram_budget, o->gpu_layers);
      app.add_option("--kernels", o->kernels, "jit (default) or reference");
      return [o] { return run_speed(*o); };
    }}};

}  // namespace
}  // namespace jitllm::cli
