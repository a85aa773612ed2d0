// `jitllm decide`: System One questions on the command line, answered exactly as POST
// /v1/systemone answers them (the same app/ code: prompts, scoring, the state prefilled once):
//   jitllm decide -m MODEL --state TEXT --noul QUESTION [--noul ...] [--choice 'Q|a,b,c'] [--score Q]
// Prints the response JSON ({"model", "answers", "usage"}). Runs the Engine directly on this
// thread: no scheduler, no prefix cache, nothing of src/server.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/loaded_model.h"
#include "app/systemone.h"
#include "app/systemone_scoring.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace jitllm::cli {
namespace {

struct DecideArgs {
  std::string model, state, state_file, chat_template, kernels;
  std::string devices = "cpu", vram_budget;
  std::string host_budget;  // --host-budget (EngineOptions::host_budget)
  int gpu_layers = -1;
  std::vector<std::string> noul, choice, score;
  int threads = 0;
};

int run_decide(const DecideArgs& a) {
  if (a.threads > 0) ThreadPool::set_global_threads(a.threads);
  std::string state = a.state;
  if (!a.state_file.empty()) {
    if (!state.empty()) throw_error("give the state with --state or --state-file, not both");
    std::ifstream in(a.state_file, std::ios::binary);
    if (!in) throw_error("{}: cannot read the state file", a.state_file);
    std::stringstream ss;
    ss << in.rdbuf();
    state = ss.str();
  }
  nlohmann::json questions = nlohmann::json::object();
  int i = 0;
  for (const auto& q : a.noul)
    questions[fmt::format("q{}", ++i)] = {{"type", "noul"}, {"instructions", q}};
  for (const auto& spec : a.choice) {
    const size_t bar = spec.rfind('|');
    if (bar == std::string::npos)
      throw_error("--choice '{}': expected 'QUESTION|label1,label2,...'", spec);
    nlohmann::json labels = nlohmann::json::array();
    std::stringstream ss(spec.substr(bar + 1));
    for (std::string l; std::getline(ss, l, ',');) labels.push_back(l);
    questions[fmt::format("q{}", ++i)] = {
        {"type", "choice"}, {"instructions", spec.substr(0, bar)}, {"choices", labels}};
  }
  for (const auto& q : a.score)
    questions[fmt::format("q{}", ++i)] = {{"type", "score"}, {"instructions", q}};
  if (questions.empty()) throw_error("no question: give --noul, --choice or --score");

  // A refused request is an app::RequestError, a jitllm::Error: main prints its one line.
  const app::SystemOneRequest req =
      app::parse_systemone_request({{"state", state}, {"questions", questions}});
  app::LoadOptions lo;
  lo.path = a.model;
  lo.chat_template = a.chat_template;
  lo.engine.cpu_kernels = a.kernels;
  lo.engine.devices = a.devices;
  lo.engine.vram_budget = a.vram_budget;
  lo.engine.host_budget = a.host_budget;
  lo.engine.gpu_layers = a.gpu_layers;
  app::LoadedModel model(lo);
  // The sessions get the training context, as jitllmd's do without -max-seq.
  const int64_t n_ctx = model.engine().config().n_ctx_train;
  const app::SystemOnePlan plan = app::plan_systemone(req, model);
  const app::SystemOneResult result =
      app::evaluate_systemone(plan, model.engine(), /*cache=*/nullptr, n_ctx);
  fmt::print("{}\n", app::systemone_response(req, result, app::model_name_of(a.model)).dump(2));
  return 0;
}

const RegisterCommand reg{Command{
    "decide", "Answer System One questions (yes/no, choice, score) about a state",
    [](CLI::App& app) -> std::function<int()> {
      auto a = std::make_shared<DecideArgs>();
      app.add_option("-m,--model", a->model, "Model: .gguf, .jlm or HF folder (default: models/demo)");
      app.add_option("--state", a->state, "The state the questions are about");
      app.add_option("--state-file", a->state_file, "Read the state from a file");
      app.add_option("--noul", a->noul, "A yes/no question (repeatable)");
      app.add_option("--choice", a->choice, "'QUESTION|label1,label2,...' (repeatable)");
      app.add_option("--score", a->score, "A question scored on levels 1..5 (repeatable)");
      app.add_option("--chat-template", a->chat_template, "chat template: a Jinja file or a built-in name (chatml, qwen, llama3, gemma, mistral, phi3)");
      app.add_option("-t,--threads", a->threads, "Threads (default: all cores)");
      app.add_option("--kernels", a->kernels, "CPU kernels: jit or reference");
      add_device_flags(app, a->devices, a->vram_budget, a->gpu_layers, a->host_budget);
      return [a] { return run_decide(*a); };
    }}};

}  // namespace
}  // namespace jitllm::cli
