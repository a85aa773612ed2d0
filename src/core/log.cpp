// The log threshold of log.h: JITLLM_LOG (core/tuning.h) until set_log_threshold changes it.
#include "core/log.h"

#include <atomic>

#include "core/error.h"
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

}  // namespace

LogLevel log_threshold() { return LogLevel(threshold().load(std::memory_order_relaxed)); }
void set_log_threshold(LogLevel level) { threshold().store(int(level)); }

}  // namespace jitllm
