// `jitllm eval -m MODEL --ids "1 2 3" [--logits OUT.f32]`: runs the ids as one prompt (in
// prefill chunks of -b tokens), optionally writes the logits of every position as little-endian
// float32 [n_tokens, n_vocab], and prints the top-5 of the last row. For comparing with
// llama.cpp's logits; JITLLM_DUMP (see src/model/dump.h) dumps intermediate tensors.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"

namespace jitllm::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string ids;
  std::string logits_path;
  std::string kv_type = "f16";
  std::string kernels;
  std::string devices = "cpu";
  std::string vram_budget;
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
  int threads = 0;
  int64_t batch = 256;
};

// Accepts "1 2 3", "1,2,3" and "[1, 2, 3]".
std::vector<int32_t> parse_ids(std::string text) {
  for (char& ch : text)
    if (ch == ',' || ch == '[' || ch == ']') ch = ' ';
  std::vector<int32_t> ids;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw_error("--ids: '{}' is not a token id", item);
    ids.push_back(int32_t(v));
  }
  if (ids.empty()) throw_error("--ids: no token ids given");
  return ids;
}

QuantType parse_kv_type(const std::string& s) {
  if (s == "f16") return QuantType::F16;
  if (s == "f32") return QuantType::F32;
  throw_error("--kv-type: '{}' is not f16 or f32", s);
}

int run_eval(const EvalArgs& args) {
  if (args.threads > 0) ThreadPool::set_global_threads(args.threads);
  const std::vector<int32_t> ids = parse_ids(args.ids);
  EngineOptions options;
  options.kv_type = parse_kv_type(args.kv_type);
  options.n_batch = args.batch;
  options.cpu_kernels = args.kernels;
  options.devices = args.devices;
  options.vram_budget = args.vram_budget;
  options.host_budget = args.host_budget;
  options.gpu_layers = args.gpu_layers;
  options.kv_tokens = int64_t(ids.size());
  Engine engine(load_model_file(args.model), options);
  const int64_t n_vocab = engine.config().n_vocab;
  auto session = engine.new_session(std::max<int64_t>(engine.config().n_ctx_train, int64_t(ids.size())));
  const std::vector<float> logits = engine.prefill(*session, ids, /*all_logits=*/true);

  if (!args.logits_path.empty()) {
    FILE* f = std::fopen(args.logits_path.c_str(), "wb");
    if (!f) throw_error("{}: cannot open for writing", args.logits_path);
    const size_t wrote = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    if (std::fclose(f) != 0 || wrote != logits.size())
      throw_error("{}: write failed", args.logits_path);
    fmt::print(stderr, "wrote {} x {} logits to {}\n", ids.size(), n_vocab, args.logits_path);
  }

  const float* last = logits.data() + (ids.size() - 1) * size_t(n_vocab);
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return last[a] > last[b] || (last[a] == last[b] && a < b);
  });
  fmt::print("top-{} of position {}:\n", k, ids.size() - 1);
  for (size_t i = 0; i < k; ++i) fmt::print("  {:>8} {:.6f}\n", order[i], last[order[i]]);
  return 0;
}

const RegisterCommand reg{Command{
    "eval", "Run token ids as one prompt; write every position's logits, print the top-5",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<EvalArgs>();
      app.add_option("-m,--model", args->model, "Model (.gguf or .jlm; default: models/demo)");
      app.add_option("--ids", args->ids, "Token ids, e.g. \"1 450 439\"")->required();
      app.add_option("--logits", args->logits_path, "Write float32 [n_tokens, n_vocab] here");
      app.add_option("--kv-type", args->kv_type, "KV cache type: f16 (default) or f32");
      app.add_option("--kernels", args->kernels, "CPU kernels: jit or reference (default: $JITLLM_KERNELS or jit)");
      add_device_flags(app, args->devices, args->vram_budget, args->gpu_layers, args->host_budget);
      app.add_option("-t,--threads", args->threads, "Threads (default: all cores)");
      app.add_option("-b,--batch", args->batch, "Prefill chunk in tokens (default 256)");
      return [args] { return run_eval(*args); };
    }}};

}  // namespace
}  // namespace jitllm::cli
