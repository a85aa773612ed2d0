// `jitllm speed -m MODEL -p 512 -n 128 -r R [-t N] [--ttft] [--devices cpu] [--kernels K]`:
// prefill and decode throughput on fresh sessions, printed as `pp512: X tok/s` / `tg128: Y tok/s`
// lines (what bench/ab's `auto` parser reads), plus bytes read per decoded token, the GB/s that
// implies, and that as a share of a read-bandwidth wall measured here in the same process.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
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
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
  std::string kernels = "jit";
};

// Expert pages read in one phase (prompt or decode), summed over its runs.
struct PhaseReads {
  uint64_t hits = 0, misses = 0, bytes = 0;
  double seconds = 0;
};

// The process's peak resident set (VmHWM), bytes.
uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmHWM:")) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

// The expert cache's counters per phase, and the decode rate the disk allows for the bytes each
// token read: the disk's read wall measured now with the cache's own reads.
void print_expert_reads(Engine& engine, const PhaseReads& pp, int64_t pp_tokens,
                        const PhaseReads& tg, int64_t tg_tokens) {
  ExpertCache& cache = *engine.expert_cache();
  fmt::print("{}\n", engine.host_plan().describe());
  const double wall = cache.measure_read_wall(uint64_t(1) << 30);
  for (const auto& [name, r, tokens] : {std::tuple{"prompt", pp, pp_tokens}, std::tuple{"decode", tg, tg_tokens}}) {
    if (tokens <= 0) continue;
    const uint64_t asked = r.hits + r.misses;
    const double per_token = double(r.bytes) / double(tokens);
    const double rate = r.seconds > 0 ? double(r.bytes) / r.seconds : 0.0;
    fmt::print("experts ({}): {} asked, {:.1f}% in the cache, {:.1f} MB read from disk per token, "
               "{:.2f} GB/s over the phase = {:.0f}% of the disk's {:.2f} GB/s",
               name, asked, asked ? 100.0 * double(r.hits) / double(asked) : 0.0, per_token / 1e6,
               rate / 1e9, wall > 0 ? 100.0 * rate / wall : 0.0, wall / 1e9);
    if (per_token > 0 && r.seconds > 0)
      fmt::print("; {:.2f} tok/s against the disk's {:.2f} for these bytes",
                 double(tokens) / r.seconds, wall / per_token);
    fmt::print("\n");
  }
  fmt::print("expert reads: {}, up to {} in flight\n",
             cache.direct_io() ? "O_DIRECT" : "buffered (the filesystem refused O_DIRECT)",
             ExpertCache::kQueueDepth);
}

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
  eo.host_budget = o.host_budget;
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
  // What the paged experts cost in each phase (runtime/expert_cache.h): summed over the runs.
  ExpertCache* experts = engine.expert_cache();
  PhaseReads pp_reads, tg_reads;
  const auto counted = [&](PhaseReads& into, auto&& run) {
    const ExpertCacheStats before = experts ? experts->stats() : ExpertCacheStats{};
    const auto t0 = Clock::now();
    run();
    into.seconds += secs(t0, Clock::now());
    if (!experts) return;
    const ExpertCacheStats after = experts->stats();
    into.hits += after.hits - before.hits;
    into.misses += after.misses - before.misses;
    into.bytes += after.bytes_read - before.bytes_read;
  };
  for (int r = 0; r < o.reps; ++r) {
    if (o.prompt > 0) {
      auto s = engine.new_session(n_ctx);
      const auto p = prompt_tokens(o.prompt);
      const auto t0 = Clock::now();
      counted(pp_reads, [&] { engine.prefill(*s, p, false); });
      pp.push_back(double(o.prompt) / secs(t0, Clock::now()));
    }
    if (o.gen > 0) {
      // As llama-bench's tg: generation from an empty context, one token per step.
      auto s = engine.new_session(n_ctx);
      int32_t t = 1;
      const auto t0 = Clock::now();
      counted(tg_reads, [&] {
      for (int i = 0; i < o.gen; ++i) {
        if (o.logits) {  // every step's logits come home and the host picks
          const auto logits = engine.decode(*s, t);
          t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        } else {  // only the greedy token comes home (on a card: the pick runs there)
          t = engine.decode_greedy(*s, t);
        }
      }
      });
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
  if (experts) print_expert_reads(engine, pp_reads, o.prompt * int64_t(pp.size()), tg_reads,
                                  o.gen * int64_t(tg.size()));
  fmt::print("peak resident memory: {:.2f} GiB\n", double(peak_rss_bytes()) / double(1ull << 30));
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
      add_device_flags(app, o->devices, o->vram_budget, o->gpu_layers, o->host_budget);
      app.add_option("--kernels", o->kernels, "jit (default) or reference");
      return [o] { return run_speed(*o); };
    }}};

}  // namespace
}  // namespace jitllm::cli
