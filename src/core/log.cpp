#include "core/log.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace jitllm {

namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("JITLLM_LOG");
  if (!env) return LogLevel::Warn;
  const std::string v = env;
  if (v == "debug") return LogLevel::Debug;
  if (v == "info") return LogLevel::Info;
  if (v == "error") return LogLevel::Error;
  return LogLevel::Warn;
}

std::atomic<int>& threshold() {
  static std::atomic<int> t{int(level_from_env())};
  return t;
}

}  // namespace

LogLevel log_threshold() { return LogLevel(threshold().load(std::memory_order_relaxed)); }
void set_log_threshold(LogLevel level) { threshold().store(int(level)); }

}  // namespace jitllm
