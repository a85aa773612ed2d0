// `jitllm embed`: embeddings of texts, or a cross-encoder's scores of documents for a query,
// computed as jitllmd's /v1/embeddings and /v1/rerank compute them (app/embeddings.h):
//   jitllm embed -m MODEL -p TEXT [-p TEXT ...] [-f FILE] [--pooling mean|cls|last] [--no-normalize]
//   jitllm embed -m RERANKER --rerank QUERY -p DOC [-p DOC ...]
// Prints one line per text: its vector's numbers (or, with --rerank, its score), or with --json
// an OpenAI-shaped {"data": [{"index", "embedding"}...]} (with --rerank: {"results": [{"index",
// "relevance_score"}...]}, in input order).
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/embeddings.h"
#include "app/loaded_model.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace jitllm::cli {
namespace {

struct EmbedArgs {
  std::string model, file, pooling, rerank, kernels;
  std::string devices = "cpu", vram_budget;
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
  std::vector<std::string> texts;
  bool no_normalize = false, json = false;
  int threads = 0;
};

int run_embed(EmbedArgs a) {
  if (a.threads > 0) ThreadPool::set_global_threads(a.threads);
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) throw_error("{}: cannot read", a.file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) a.texts.push_back(line);
  }
  if (a.texts.empty()) throw_error("no text: give -p TEXT (repeatable) or -f FILE (one per line)");
  const Pooling requested = a.pooling.empty() ? Pooling::Unspecified : parse_pooling(a.pooling);
  app::LoadOptions lo;
  lo.path = a.model;
  lo.engine.cpu_kernels = a.kernels;
  lo.engine.devices = a.devices;
  lo.engine.vram_budget = a.vram_budget;
  lo.engine.host_budget = a.host_budget;
  lo.engine.gpu_layers = a.gpu_layers;
  app::LoadedModel model(lo);
  Engine& engine = model.engine();

  std::vector<std::vector<int32_t>> inputs, types;
  Pooling pooling = Pooling::Rank;
  if (!a.rerank.empty()) {
    if (requested != Pooling::Unspecified) throw_error("--pooling does not apply to --rerank");
    for (const std::string& doc : a.texts) {
      app::RerankInput in = app::rerank_input(model, a.rerank, doc);
      inputs.push_back(std::move(in.ids));
      types.push_back(std::move(in.types));
    }
    if (types.front().empty()) types.clear();  // a one-type model: all type 0
  } else {
    pooling = app::embedding_pooling(engine, requested);
    for (const std::string& text : a.texts) inputs.push_back(app::embedding_tokens(model, text));
  }
  const std::vector<float> out = engine.embed(inputs, pooling, !a.no_normalize, types);
  const size_t width = size_t(engine.embedding_width(pooling));
  if (a.json) {
    nlohmann::json j;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<float> v(out.begin() + ptrdiff_t(i * width), out.begin() + ptrdiff_t((i + 1) * width));
      if (pooling == Pooling::Rank)
        j["results"].push_back({{"index", i}, {"relevance_score", v[0]}});
      else
        j["data"].push_back({{"index", i}, {"embedding", v}});
    }
    fmt::print("{}\n", j.dump());
    return 0;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string line;
    for (size_t d = 0; d < width; ++d) line += fmt::format("{}{:.9g}", d ? " " : "", out[i * width + d]);
    fmt::print("{}\n", line);
  }
  return 0;
}

const RegisterCommand reg{Command{
    "embed", "Embeddings of texts (pooled hidden states), or a reranker's scores of documents",
    [](CLI::App& app) -> std::function<int()> {
      auto a = std::make_shared<EmbedArgs>();
      app.add_option("-m,--model", a->model, "Model: .gguf, .jlm or HF folder (default: models/demo)");
      app.add_option("-p,--prompt", a->texts, "A text (repeatable)");
      app.add_option("-f,--file", a->file, "Texts, one per line");
      app.add_option("--pooling", a->pooling,
                     "mean, cls or last (default: the model's <arch>.pooling_type)");
      app.add_flag("--no-normalize", a->no_normalize, "Leave the vectors unnormalised (default: unit length)");
      app.add_option("--rerank", a->rerank, "Score the texts as documents for this query (a cross-encoder)");
      app.add_flag("--json", a->json, "Print JSON (OpenAI's embeddings shape, or rerank results)");
      app.add_option("-t,--threads", a->threads, "Threads (default: all cores)");
      app.add_option("--kernels", a->kernels, "CPU kernels: jit or reference");
      add_device_flags(app, a->devices, a->vram_budget, a->gpu_layers, a->host_budget);
      return [a] { return run_embed(*a); };
    }}};

}  // namespace
}  // namespace jitllm::cli
