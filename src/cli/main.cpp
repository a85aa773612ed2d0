// `jitllm` entry point: parses the subcommand, runs it, turns any jitllm::Error into one line on
// stderr and a non-zero exit code.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>

#include "cli/command.h"
#include "core/error.h"

namespace jitllm::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace jitllm::cli

int main(int argc, char** argv) {
  using namespace jitllm::cli;
  CLI::App app{"jitllm: LLM inference with kernels generated at run time"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "jitllm 0.1.0");

  auto commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> runners;
  for (const auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    runners[sub] = command.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const jitllm::Error& e) {
    fmt::print(stderr, "jitllm: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "jitllm: internal error: {}\n", e.what());
    return 2;
  }
  return 1;
}
