// Input for the chat REPL: on a terminal, libedit's line editing (arrows, Ctrl-A/E, ...) and a
// history kept across runs; from a pipe or file, plain lines. A line ending in '\' continues on
// the next one (the backslash becomes a newline).
#pragma once

#include <optional>
#include <string>

namespace jitllm::cli {

class LineReader {
 public:
  // `history_file`: where a terminal session's history is read from and appended to ("" = none).
  explicit LineReader(std::string history_file);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // One input (maybe several lines); nullopt at the end of input (Ctrl-D).
  std::optional<std::string> read(const std::string& prompt);
  bool interactive() const { return interactive_; }

  // $XDG_STATE_HOME/jitllm/chat_history (default ~/.local/state/...), "" when neither is set.
  static std::string default_history_file();

 private:
  std::optional<std::string> read_line(const std::string& prompt);
  bool interactive_;
  std::string history_file_;
};

}  // namespace jitllm::cli
