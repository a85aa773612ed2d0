// A log line with named fields (jitllmd's access lines, its startup banner): in text format
// "jitllm info: request id=cmpl-1 route=/v1/completions status=200 ...", in JSON format the
// fields are members of the line's object next to "time", "level" and "msg".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/log.h"

namespace jitllm {

void log_event(LogLevel level, const std::string& message, const nlohmann::ordered_json& fields);

}  // namespace jitllm
