// LineReader (see line_reader.h) over libedit's readline interface (Debian's libedit; BSD
// licensed, unlike GNU readline).
#include "cli/line_reader.h"

#include <editline/readline.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace jitllm::cli {

LineReader::LineReader(std::string history_file)
    : interactive_(::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO)),
      history_file_(std::move(history_file)) {
  if (!interactive_) return;
  using_history();
  stifle_history(1000);
  if (!history_file_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(history_file_).parent_path(), ec);
    read_history(history_file_.c_str());  // a missing file is a first run
  }
}

LineReader::~LineReader() {
  if (interactive_ && !history_file_.empty()) write_history(history_file_.c_str());
}

std::string LineReader::default_history_file() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state)
    return std::string(state) + "/jitllm/chat_history";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.local/state/jitllm/chat_history";
  return "";
}

std::optional<std::string> LineReader::read_line(const std::string& prompt) {
  if (interactive_) {
    char* line = readline(prompt.c_str());
    if (!line) return std::nullopt;
    std::string text(line);
    std::free(line);
    return text;
  }
  fmt::print("{}", prompt);
  std::fflush(stdout);
  std::string text;
  if (!std::getline(std::cin, text)) return std::nullopt;
  return text;
}

std::optional<std::string> LineReader::read(const std::string& prompt) {
  std::string text;
  std::string shown = prompt;
  while (true) {
    std::optional<std::string> line = read_line(shown);
    if (!line) return text.empty() ? std::nullopt : std::optional(text);
    if (!line->empty() && line->back() == '\\') {
      text += line->substr(0, line->size() - 1) + "\n";
      shown = "... ";
      continue;
    }
    text += *line;
    break;
  }
  if (interactive_ && !text.empty()) add_history(text.c_str());
  return text;
}

}  // namespace jitllm::cli
