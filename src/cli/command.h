// Subcommand registry of the `jitllm` tool. Each src/cli/cmd_<name>.cpp defines one subcommand
// and registers it with a static `RegisterCommand`, so adding a command touches no shared file.
// The files are compiled straight into the executable (not a library), so registration is kept.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace jitllm::cli {

struct Command {
  std::string name;
  std::string help;
  // Adds the subcommand's options to `app`; returns the function that runs it (exit code).
  std::function<std::function<int()>(CLI::App& app)> setup;
};

std::vector<Command>& command_registry();

struct RegisterCommand {
  explicit RegisterCommand(Command command) { command_registry().push_back(std::move(command)); }
};

}  // namespace jitllm::cli
