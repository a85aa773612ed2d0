// The log threshold and format of log.h: JITLLM_LOG (core/tuning.h) until set_log_threshold
// changes it; text until set_log_format.
#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "core/log_event.h"
#include "core/tuning.h"

namespace jitllm {

namespace {

LogLevel level_from_env() {
  // JITLLM_LOG's words are in LogLevel's order. A bad value cannot throw from here (every log
  // call, destructors' too, reads the level): it is said once and the default taken.
  try {
    return LogLevel(tuning::core_knobs().log.number());
  } catch (const Error& e) {
    fmt::print(stderr, "jitllm error: {}\n", e.what());
    return LogLevel::Warn;
  }
}

std::atomic<int>& threshold() {
  static std::atomic<int> t{int(level_from_env())};
  return t;
}

std::atomic<int> g_format{int(LogFormat::Text)};

const char* const kTags[] = {"debug", "info", "warn", "error"};

std::string iso_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, int(ms));
}

void write_line(const std::string& line) {
  // One fwrite per line: stderr is unbuffered, so a line goes out whole.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

std::string text_value(const nlohmann::ordered_json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const bool plain = !s.empty() && s.find_first_of(" \"=\n") == std::string::npos;
    return plain ? s : v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

LogLevel log_threshold() { return LogLevel(threshold().load(std::memory_order_relaxed)); }
void set_log_threshold(LogLevel level) { threshold().store(int(level)); }
LogFormat log_format() { return LogFormat(g_format.load(std::memory_order_relaxed)); }
void set_log_format(LogFormat format) { g_format.store(int(format)); }

void log_line(LogLevel level, const std::string& message) { log_event(level, message, {}); }

void log_event(LogLevel level, const std::string& message, const nlohmann::ordered_json& fields) {
  if (level < log_threshold()) return;
  if (log_format() == LogFormat::Json) {
    nlohmann::ordered_json line = {{"time", iso_time_now()}, {"level", kTags[int(level)]},
                                   {"msg", message}};
    if (fields.is_object())
      for (const auto& [k, v] : fields.items()) line[k] = v;
    write_line(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    return;
  }
  std::string text = fmt::format("jitllm {}: {}", kTags[int(level)], message);
  if (fields.is_object())
    for (const auto& [k, v] : fields.items()) text += fmt::format(" {}={}", k, text_value(v));
  write_line(text + "\n");
}

}  // namespace jitllm
