// `jitllm verify MODEL [--prompt TEXT] [--gen N]`: runs one prompt through every CPU kernel path
// this machine has (the reference kernels, and the generated kernels at each ISA level the CPU
// supports) and prints, per path, the max |logit diff| against the reference path and how many
// greedy tokens agree. Generated tokens are fed from the reference's greedy choice, so every path
// sees the same contexts. Exit code 1 when a path disagrees on a greedy token.
// With --devices (and --vram-budget) one more path runs the model placed on those devices (the
// host part on the generated kernels), e.g. to check a partial offload against the reference.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "runtime/cpu_kernels.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::cli {
namespace {

struct VerifyOptions {
  std::string model;
  std::string prompt = "The quick brown fox jumps over the lazy dog. Once upon a time";
  int gen = 16;
  std::string devices = "cpu", vram_budget;
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
};

struct PathRun {
  std::vector<float> prompt_logits;           // [n_prompt, n_vocab]
  std::vector<std::vector<float>> gen_logits; // per generated step
};

int argmax(const float* p, int64_t n) { return int(std::max_element(p, p + n) - p); }

PathRun run_path(std::shared_ptr<const ModelFile> file, const std::string& kernels,
                 const std::vector<int32_t>& prompt, const std::vector<int32_t>* feed, int gen,
                 std::vector<int32_t>* greedy_out, EngineOptions eo = {}) {
  eo.cpu_kernels = kernels;
  eo.kv_tokens = int64_t(prompt.size()) + gen + 8;
  Engine engine(std::move(file), eo);
  const int64_t nv = engine.config().n_vocab;
  auto s = engine.new_session(int64_t(prompt.size()) + gen + 8);
  PathRun out;
  out.prompt_logits = engine.prefill(*s, prompt, true);
  int32_t next = argmax(out.prompt_logits.data() + (int64_t(prompt.size()) - 1) * nv, nv);
  for (int i = 0; i < gen; ++i) {
    const int32_t fed = feed ? (*feed)[size_t(i)] : next;
    if (greedy_out) greedy_out->push_back(fed);
    out.gen_logits.push_back(engine.decode(*s, fed));
    next = argmax(out.gen_logits.back().data(), nv);
  }
  return out;
}

int run_verify(const VerifyOptions& o) {
  std::shared_ptr<const ModelFile> file = load_model_file(o.model);
  const Tokenizer tok(file->metadata);
  std::vector<int32_t> prompt;
  for (auto id : tok.encode(o.prompt, true)) prompt.push_back(int32_t(id));
  if (prompt.empty()) throw_error("verify: the prompt has no tokens");

  // (label, kernels): every generated ISA level this CPU runs, then the --devices path.
  std::vector<std::pair<std::string, std::string>> paths;
  for (const std::string& name : jit_kernel_names()) paths.emplace_back(name, name);

  std::vector<int32_t> greedy;
  EngineOptions on_host;  // every host path under the same --host-budget
  on_host.host_budget = o.host_budget;
  const PathRun ref = run_path(file, "reference", prompt, nullptr, o.gen, &greedy, on_host);
  const int64_t nv = int64_t(ref.prompt_logits.size() / prompt.size());
  fmt::print("model: {}\nprompt: {} tokens, {} generated (greedy from the reference path)\n",
             file->path, prompt.size(), o.gen);
  fmt::print("{:<12} {:>14} {:>14} {:>10}\n", "path", "max|d| prompt", "max|d| gen", "greedy");
  fmt::print("{:<12} {:>14} {:>14} {:>10}\n", "reference", "0", "0",
             fmt::format("{}/{}", o.gen + 1, o.gen + 1));
  bool ok = true;
  std::vector<std::pair<std::string, EngineOptions>> where(paths.size(), {"", on_host});
  if (o.devices != "cpu") {
    paths.emplace_back(o.devices, "jit");
    EngineOptions eo;
    eo.devices = o.devices;
    eo.vram_budget = o.vram_budget;
    eo.host_budget = o.host_budget;
    eo.gpu_layers = o.gpu_layers;
    where.emplace_back(o.devices, eo);
  }
  for (size_t pi = 0; pi < paths.size(); ++pi) {
    auto& [name, k] = paths[pi];
    const PathRun r = run_path(file, k, prompt, &greedy, o.gen, nullptr, where[pi].second);
    float dp = 0, dg = 0;
    for (size_t i = 0; i < ref.prompt_logits.size(); ++i)
      dp = std::max(dp, std::fabs(ref.prompt_logits[i] - r.prompt_logits[i]));
    int agree = 0;
    const int64_t last = int64_t(prompt.size()) - 1;
    agree += argmax(ref.prompt_logits.data() + last * nv, nv) ==
             argmax(r.prompt_logits.data() + last * nv, nv);
    for (int i = 0; i < o.gen; ++i) {
      for (int64_t j = 0; j < nv; ++j)
        dg = std::max(dg, std::fabs(ref.gen_logits[size_t(i)][size_t(j)] - r.gen_logits[size_t(i)][size_t(j)]));
      agree += argmax(ref.gen_logits[size_t(i)].data(), nv) == argmax(r.gen_logits[size_t(i)].data(), nv);
    }
    ok = ok && agree == o.gen + 1;
    fmt::print("{:<12} {:>14.3g} {:>14.3g} {:>10}\n", name, dp, dg,
               fmt::format("{}/{}", agree, o.gen + 1));
  }
  return ok ? 0 : 1;
}

const RegisterCommand kRegister{Command{
    "verify", "Compare every CPU kernel path against the reference on one prompt",
    [](CLI::App& app) -> std::function<int()> {
      auto o = std::make_shared<VerifyOptions>();
      app.add_option("model", o->model, "model file (.gguf / .jlm)")->required();
      app.add_option("--prompt", o->prompt, "prompt text");
      app.add_option("-n,--gen", o->gen, "greedy tokens to compare after the prompt (default 16)");
      add_device_flags(app, o->devices, o->vram_budget, o->gpu_layers, o->host_budget);
      return [o] { return run_verify(*o); };
    }}};

}  // namespace
}  // namespace jitllm::cli
