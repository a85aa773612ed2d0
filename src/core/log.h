// Minimal leveled logging to stderr. JITLLM_LOG=debug|info|warn|error picks the threshold.
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace jitllm {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

LogLevel log_threshold();
void set_log_threshold(LogLevel level);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_threshold()) return;
  static const char* tags[] = {"debug", "info", "warn", "error"};
  fmt::print(stderr, "jitllm {}: {}\n", tags[int(level)],
             fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace jitllm
