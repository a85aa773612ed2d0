// Leveled logging to stderr, one line per message. JITLLM_LOG=debug|info|warn|error picks the
// threshold (set_log_threshold overrides it: jitllmd's --log-level). Lines are text
// ("jitllm info: ...") or, after set_log_format(Json), one JSON object per line with the time,
// the level and the message, plus named fields for log_event (core/log_event.h).
#pragma once

#include <fmt/format.h>

#include <string>

namespace jitllm {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };
enum class LogFormat { Text, Json };

LogLevel log_threshold();
void set_log_threshold(LogLevel level);
LogFormat log_format();
void set_log_format(LogFormat format);

// Writes one line (whole, so lines of several threads do not interleave).
void log_line(LogLevel level, const std::string& message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_threshold()) return;
  log_line(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace jitllm
