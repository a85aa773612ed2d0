// `jitllm batched -m MODEL -s 1,8,32 -n 64 [-p 16] [--devices cuda]`: decode throughput of N
// sessions stepping together (llama-batched-bench's "S_TG" idea): each session gets its own
// random prompt of -p tokens, then -n steps in which every session decodes one greedy token in
// one ragged Engine::step. Prints per session count the total decoded tokens per second, and the
// bytes a step reads (the weights once, every session's keys and values) against the read wall
// measured in the same process.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <vector>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "runtime/read_wall.h"

namespace jitllm::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BatchedOptions {
  std::string model;
  std::string sessions = "1,8,32";
  int prompt = 16, gen = 64;
  std::string devices = "cpu";
  std::string vram_budget;
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
  std::string kernels = "jit";
};

std::vector<int> parse_counts(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int v = 0;
    try {
      v = std::stoi(item);
    } catch (const std::exception&) {
      throw_error("-s: '{}' is not a session count (comma-separated positive integers)", item);
    }
    if (v <= 0) throw_error("-s: session count {} must be positive", v);
    out.push_back(v);
  }
  if (out.empty()) throw_error("-s: no session counts given");
  return out;
}

int run_batched(const BatchedOptions& o) {
  if (o.prompt < 1 || o.gen < 1) throw_error("-p and -n must be at least 1");
  const std::vector<int> counts = parse_counts(o.sessions);
  std::shared_ptr<const ModelFile> file = load_model_file(o.model);
  EngineOptions eo;
  eo.cpu_kernels = o.kernels;
  eo.devices = o.devices;
  eo.vram_budget = o.vram_budget;
  eo.host_budget = o.host_budget;
  eo.gpu_layers = o.gpu_layers;
  eo.kv_tokens = int64_t(*std::max_element(counts.begin(), counts.end())) * (o.prompt + o.gen + 8);
  Engine engine(file, eo);
  const int64_t nv = engine.config().n_vocab;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(nv - 1));
  fmt::print("model: {}, devices: {}, prompt {} tokens per session, {} steps\n", file->path,
             o.devices, o.prompt, o.gen);
  // Bytes per attended position: what every layer keeps (K and V, or MLA's latent), from the
  // pages' layout, which knows each layer's widths.
  const KvLayout& kv = engine.kv_pool().layout();
  const double kv_bytes_per_pos = double(kv.page_bytes()) / double(kv.page_tokens);
  const ReadWall wall = measure_read_wall(o.devices);
  for (int S : counts) {
    std::vector<std::unique_ptr<Session>> ses;
    std::vector<int32_t> next(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) {
      ses.push_back(engine.new_session(o.prompt + o.gen + 8));
      std::vector<int32_t> p(static_cast<size_t>(o.prompt));
      for (auto& t : p) t = tok(rng);
      const std::vector<float> l = engine.prefill(*ses.back(), p, false);
      next[size_t(s)] = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    }
    std::vector<StepInput> in(static_cast<size_t>(S));
    auto step = [&] {
      for (int s = 0; s < S; ++s)
        in[size_t(s)] = StepInput{ses[size_t(s)].get(), std::span<const int32_t>(&next[size_t(s)], 1), false};
      next = engine.step_greedy(in);  // only the greedy ids come home
    };
    const int warm = std::min(2, o.gen - 1);  // the first steps of a row count capture graphs
    for (int i = 0; i < warm; ++i) step();
    const auto t0 = Clock::now();
    for (int i = warm; i < o.gen; ++i) step();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double steps = double(o.gen - warm);
    fmt::print("sessions {:3}: {:9.1f} tok/s total, {:7.1f} tok/s per session, {:7.3f} ms per step\n",
               S, double(S) * steps / secs, steps / secs, 1000.0 * secs / steps);
    // Timed step i attends prompt + i + 1 positions per session: on average prompt + the mean of
    // (warm + 1 .. gen).
    const double positions = double(o.prompt) + 0.5 * double(warm + 1 + o.gen);
    const double kv = double(S) * positions * kv_bytes_per_pos;
    const double weight_bytes = weight_bytes_per_token(*file, S);
    const double gbs = (weight_bytes + kv) * steps / secs / 1e9;
    fmt::print("  a step reads {:.1f} MB weights + {:.1f} MB KV: {:.1f} GB/s = {:.0f}% of the {:.1f} GB/s "
               "read wall measured with {}\n",
               weight_bytes / 1e6, kv / 1e6, gbs, 100.0 * gbs / wall.gbs, wall.gbs, wall.how);
  }
  return 0;
}

const RegisterCommand kRegister{Command{
    "batched", "Decode throughput of N sessions stepping together (total tok/s per N)",
    [](CLI::App& app) -> std::function<int()> {
      auto o = std::make_shared<BatchedOptions>();
      app.add_option("-m,--model", o->model, "model file (.gguf / .jlm)")->required();
      app.add_option("-s,--sessions", o->sessions, "session counts, comma-separated (default 1,8,32)");
      app.add_option("-p,--prompt", o->prompt, "prompt tokens per session (default 16)");
      app.add_option("-n,--gen", o->gen, "decode steps (default 64)");
      add_device_flags(app, o->devices, o->vram_budget, o->gpu_layers, o->host_budget);
      app.add_option("--kernels", o->kernels, "jit (default) or reference");
      return [o] { return run_batched(*o); };
    }}};

}  // namespace
}  // namespace jitllm::cli
