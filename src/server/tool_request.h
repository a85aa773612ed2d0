// The tool part of a chat request: `tools` (function definitions), `tool_choice` (none, auto,
// required, or one named function) and `parallel_tool_calls`, validated as OpenAI does, and
// the conversation adapted to what the model's template can render (tool_syntax.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace jitllm::server {

struct ToolDefinition {
  std::string name;                  // [A-Za-z0-9_-]{1,64}
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON Schema of the arguments object (as written)
};

enum class ToolChoice { None, Auto, Required, Named };

struct ToolRequest {
  std::vector<ToolDefinition> tools;
  ToolChoice choice = ToolChoice::Auto;  // OpenAI: auto when tools are given, none otherwise
  std::string named;                     // the function tool_choice names (Named)
  bool parallel = true;                  // parallel_tool_calls: more than one call per turn
  // Calls are parsed out of the output (and enforced when required or named).
  bool calls_expected() const { return !tools.empty() && choice != ToolChoice::None; }
};

// Throws ApiError 400 naming the parameter. `ordered`: the body as ordered_json (parameter
// schemas keep the order their properties were written in), or null.
ToolRequest parse_tool_request(const nlohmann::json& body, const nlohmann::ordered_json* ordered);

}  // namespace jitllm::server
