// Tools, tool_choice and parallel_tool_calls of a chat request (see tool_request.h).
#include "server/tool_request.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "server/api_error.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const json* present(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

ToolDefinition parse_tool(const json& tool, const ojson* ordered, size_t i) {
  const std::string at = fmt::format("tools[{}]", i);
  if (!tool.is_object()) throw invalid_request(at, fmt::format("'{}' must be an object", at));
  const json* type = present(tool, "type");
  if (!type || *type != "function")
    throw invalid_request(at + ".type", fmt::format("'{}.type' must be \"function\"", at));
  const json* fn = present(tool, "function");
  if (!fn || !fn->is_object())
    throw invalid_request(at + ".function", fmt::format("'{}.function' must be an object", at));
  ToolDefinition d;
  const json* name = present(*fn, "name");
  if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
    throw invalid_request(at + ".function.name",
                          fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_' "
                                      "or '-'", at));
  d.name = name->get<std::string>();
  if (const json* desc = present(*fn, "description")) {
    if (!desc->is_string())
      throw invalid_request(at + ".function.description",
                            fmt::format("'{}.function.description' must be a string", at));
    d.description = desc->get<std::string>();
  }
  if (const json* strict = present(*fn, "strict"); strict && !strict->is_boolean())
    throw invalid_request(at + ".function.strict",
                          fmt::format("'{}.function.strict' must be a boolean", at));
  if (const json* params = present(*fn, "parameters")) {
    if (!params->is_object())
      throw invalid_request(at + ".function.parameters",
                            fmt::format("'{}.function.parameters' must be a JSON Schema object", at));
    d.parameters = ordered ? (*ordered)["tools"][i]["function"]["parameters"]
                           : ojson::parse(params->dump());
  } else {
    // OpenAI: no parameters means a function that takes none.
    d.parameters = {{"type", "object"}, {"properties", ojson::object()}};
  }
  return d;
}

}  // namespace

ToolRequest parse_tool_request(const json& body, const ojson* ordered) {
  ToolRequest r;
  if (const json* tools = present(body, "tools")) {
    if (!tools->is_array()) throw invalid_request("tools", "'tools' must be an array");
    if (tools->size() > 128)
      throw invalid_request("tools", fmt::format("'tools' holds {} functions; at most 128 are "
                                                 "allowed", tools->size()));
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      r.tools.push_back(parse_tool((*tools)[i], ordered, i));
      if (!names.insert(r.tools.back().name).second)
        throw invalid_request(fmt::format("tools[{}].function.name", i),
                              fmt::format("two tools are named '{}'", r.tools.back().name));
    }
  }
  r.choice = r.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
  if (const json* choice = present(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") r.choice = ToolChoice::None;
      else if (c == "auto") r.choice = ToolChoice::Auto;
      else if (c == "required") r.choice = ToolChoice::Required;
      else
        throw invalid_request("tool_choice", fmt::format("'tool_choice' must be none, auto, "
                                                         "required or a function, got '{}'", c));
    } else if (choice->is_object()) {
      const json* type = present(*choice, "type");
      const json* fn = present(*choice, "function");
      const json* name = fn && fn->is_object() ? present(*fn, "name") : nullptr;
      if (!type || *type != "function" || !name || !name->is_string())
        throw invalid_request("tool_choice", "a named 'tool_choice' is {\"type\": \"function\", "
                                             "\"function\": {\"name\": ...}}");
      r.choice = ToolChoice::Named;
      r.named = name->get<std::string>();
      bool known = false;
      for (const auto& t : r.tools) known |= t.name == r.named;
      if (!known)
        throw invalid_request("tool_choice", fmt::format("'tool_choice' names '{}', which is not "
                                                         "among the tools", r.named));
    } else {
      throw invalid_request("tool_choice", "'tool_choice' must be a string or an object");
    }
    if (r.choice == ToolChoice::Required && r.tools.empty())
      throw invalid_request("tool_choice", "'tool_choice' is \"required\" but no tools are given");
  }
  if (const json* parallel = present(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean())
      throw invalid_request("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r.parallel = parallel->get<bool>();
  }
  return r;
}

}  // namespace jitllm::server
