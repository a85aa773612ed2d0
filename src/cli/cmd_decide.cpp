// `jitllm decide`: System One questions on the command line, answered exactly as POST
// /v1/systemone answers them (same prompts, same scoring, the state prefilled once):
//   jitllm decide -m MODEL --state TEXT --noul QUESTION [--noul ...] [--choice 'Q|a,b,c'] [--score Q]
// Prints the response JSON ({"model", "answers", "usage"}).
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "app/systemone.h"
#include "server/served_model.h"

namespace jitllm::cli {
namespace {

struct DecideArgs {
  std::string model, state, state_file, chat_template, kernels;
  std::string devices = "cpu", vram_budget;
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

  const app::SystemOneRequest req =
      app::parse_systemone_request({{"state", state}, {"questions", questions}});
  server::Metrics metrics;
  server::ModelOptions mo;
  mo.path = a.model;
  mo.chat_template_file = a.chat_template;
  mo.kernels = a.kernels;
  mo.devices = a.devices;
  mo.vram_budget = a.vram_budget;
  mo.gpu_layers = a.gpu_layers;
  mo.scheduler.cache_sessions = 0;
  server::ServedModel model(mo, metrics);
  const app::SystemOneResult result = model.run_systemone(req);
  fmt::print("{}\n", app::systemone_response(req, result, model.id()).dump(2));
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
      app.add_option("--chat-template", a->chat_template, "Jinja chat template file");
      app.add_option("-t,--threads", a->threads, "Threads (default: all cores)");
      app.add_option("--kernels", a->kernels, "CPU kernels: jit or reference");
      add_device_flags(app, a->devices, a->vram_budget, a->gpu_layers);
      return [a] { return run_decide(*a); };
    }}};

}  // namespace
}  // namespace jitllm::cli
