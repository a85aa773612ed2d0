// `jitllm` entry point: parses the subcommand, runs it, turns any jitllm::Error into one line on
// stderr and a non-zero exit code.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "core/flag_spelling.h"
#include "core/suggest.h"
#include "core/version.h"

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
  app.set_version_flag("--version", std::string("jitllm ") + jitllm::version_text());

  auto commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> runners;
  for (const auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    runners[sub] = command.setup(*sub);
  }
  // A mistyped command: the nearest one (CLI11 2.1 only says it was not expected).
  std::vector<std::string> names;
  for (const auto& command : commands) names.push_back(command.name);
  if (argc > 1 && argv[1][0] != '-' &&
      std::find(names.begin(), names.end(), argv[1]) == names.end()) {
    const std::string near = jitllm::closest_name(argv[1], names);
    fmt::print(stderr, "jitllm: unknown command '{}'{}\nRun with --help for the commands.\n",
               argv[1], near.empty() ? "" : fmt::format(" (did you mean {}?)", near));
    return 2;
  }
  // llama.cpp's multi-letter short flags, which CLI11 would read as clusters ("-ngl" as -n gl).
  const jitllm::FlagSpelling spelled =
      jitllm::respell_flags(argc, argv,
                            {{"ngl", "gpu-layers"}, {"np", "parallel"}, {"fa", "flash-attn"},
                             {"ctk", "cache-type-k"}, {"ctv", "cache-type-v"}},
                            {});
  std::vector<const char*> args;
  for (const std::string& a : spelled.args) args.push_back(a.c_str());
  try {
    app.parse(int(args.size()), const_cast<char**>(args.data()));
  } catch (const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      // The nearest flag of the command that was given.
      std::string hint;
      for (auto& [sub, run] : runners) {
        if (!sub->parsed()) continue;
        std::vector<std::string> flags;
        for (const CLI::Option* o : sub->get_options())
          for (const std::string& n : o->get_lnames()) flags.push_back(n);
        for (const std::string& a : spelled.args) {
          if (a.rfind("--", 0) != 0 || std::string(e.what()).find(a) == std::string::npos) continue;
          const std::string near = jitllm::closest_name(a.substr(2, a.find('=') - 2), flags);
          if (!near.empty()) hint = fmt::format(" (did you mean --{}?)", near);
          break;
        }
      }
      fmt::print(stderr, "jitllm: {}{}\nRun with --help for the options.\n", e.what(), hint);
      return 2;
    }
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
