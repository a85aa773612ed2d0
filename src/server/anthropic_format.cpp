// Anthropic Messages requests into chat requests, job output into messages and events (see
// anthropic_format.h). Field paths in errors are written as the chat routes write them:
// messages[1].content[0].text.
#include "server/anthropic_format.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>

namespace jitllm::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Text blocks of one turn (and turns of one role merged) are joined by a blank line.
constexpr const char* kBlockSeparator = "\n\n";
constexpr size_t kMaxStopSequences = 16;
constexpr size_t kMaxTools = 128;

const json* present(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string join(const std::string& at, const std::string& key) {
  return at.empty() ? key : at + "." + key;
}

ApiError bad(const std::string& param, const std::string& message) {
  return invalid_request(param, fmt::format("{}: {}", param, message));
}

// Keys of `object` that are none of `known`: the first one is refused by name. `why` says why
// for keys clients are known to send.
void refuse_unknown_keys(const json& object, std::initializer_list<const char*> known,
                         const std::string& at) {
  static const std::pair<const char*, const char*> why[] = {
      {"thinking",
       "extended thinking is not supported (send {\"type\": \"disabled\"} or leave it out)"},
      {"container", "there is no code-execution container here"},
      {"mcp_servers", "the MCP connector is not supported"},
      {"context_management", "the context is never edited here"},
      {"citations", "citations are not supported"},
      {"stop", "send stop_sequences"},
      {"n", "one message per request"},
  };
  for (const auto& [key, value] : object.items()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (ok) continue;
    const std::string param = join(at, key);
    for (const auto& [name, reason] : why)
      if (key == name) throw bad(param, fmt::format("not supported by this server ({})", reason));
    throw bad(param, "not a field this server honours");
  }
}

std::string string_value(const json& v, const std::string& param) {
  if (!v.is_string()) throw bad(param, "must be a string");
  return v.get<std::string>();
}

double number_value(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = present(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw bad(name, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

int64_t integer_value(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) throw bad(param, "must be an integer");
    if (d < double(lo) || d > double(hi))
      throw bad(param, fmt::format("must be between {} and {}", lo, hi));
    return int64_t(d);
  }
  if (!v.is_number_integer()) throw bad(param, "must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi))
    throw bad(param, fmt::format("must be between {} and {}", lo, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw bad(param, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

// cache_control is a hint about prompt caching: every prefix is cached here anyway.
void check_cache_control(const json& object, const std::string& at) {
  const json* cc = present(object, "cache_control");
  if (!cc) return;
  const std::string param = join(at, "cache_control");
  if (!cc->is_object() || !cc->contains("type") || (*cc)["type"] != "ephemeral")
    throw bad(param, "must be {\"type\": \"ephemeral\"}");
  refuse_unknown_keys(*cc, {"type", "ttl"}, param);
  if (const json* ttl = present(*cc, "ttl"); ttl && *ttl != "5m" && *ttl != "1h")
    throw bad(param + ".ttl", "must be \"5m\" or \"1h\"");
}

// {"type": "text", "text": "..."}; `allow_empty` for a final assistant turn.
std::string text_block(const json& block, const std::string& at) {
  refuse_unknown_keys(block, {"type", "text", "cache_control", "citations"}, at);
  check_cache_control(block, at);
  if (const json* c = present(block, "citations"); c && !(c->is_array() && c->empty()))
    throw bad(at + ".citations", "citations are not supported");
  const json* text = present(block, "text");
  if (!text) throw bad(at + ".text", "is required");
  std::string s = string_value(*text, at + ".text");
  if (s.empty()) throw bad(at + ".text", "text content blocks must be non-empty");
  return s;
}

const char* unsupported_block_reason(const std::string& type) {
  if (type == "image" || type == "document" || type == "search_result")
    return "this server serves text-only models";
  if (type == "redacted_thinking") return "this server writes no redacted thinking";
  if (type == "thinking") return "thinking blocks belong in assistant messages";
  if (type == "server_tool_use" || type == "web_search_tool_result" ||
      type == "web_fetch_tool_result" || type == "code_execution_tool_result" ||
      type == "mcp_tool_use" || type == "mcp_tool_result" || type == "container_upload")
    return "server tools are not supported";
  return "unknown content block type";
}

std::string block_type(const json& block, const std::string& at) {
  if (!block.is_object()) throw bad(at, "content blocks must be objects");
  const json* type = present(block, "type");
  if (!type || !type->is_string()) throw bad(at + ".type", "is required");
  return type->get<std::string>();
}

// A tool_result's content: a string or text blocks.
std::string tool_result_text(const json& block, const std::string& at) {
  const json* content = present(block, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array())
    throw bad(at + ".content", "must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string bat = fmt::format("{}.content[{}]", at, i);
    const std::string type = block_type((*content)[i], bat);
    if (type != "text")
      throw bad(bat + ".type", fmt::format("'{}' blocks are not supported in a tool_result ({})",
                                           type, unsupported_block_reason(type)));
    text += (text.empty() ? "" : kBlockSeparator) + text_block((*content)[i], bat);
  }
  return text;
}

// One content block of a turn, as parsed.
struct Block {
  enum Kind { Text, ToolUse, ToolResult, Thinking } kind = Text;
  std::string text;  // Text, Thinking; ToolResult: the result's text
  std::string id;    // ToolUse: its id; ToolResult: tool_use_id
  std::string name;  // ToolUse
  json input;        // ToolUse: the arguments object
  bool is_error = false;
  std::string at;  // where the client wrote it
};

struct Turn {
  std::string role;
  std::vector<Block> blocks;
  std::string at;  // the first message of the (merged) turn
};

Block parse_block(const json& block, const std::string& role, const std::string& at) {
  const std::string type = block_type(block, at);
  Block b;
  b.at = at;
  if (type == "text") {
    b.text = text_block(block, at);
    return b;
  }
  if (type == "tool_use") {
    if (role != "assistant")
      throw bad(at + ".type", "tool_use blocks belong in assistant messages");
    refuse_unknown_keys(block, {"type", "id", "name", "input", "cache_control"}, at);
    check_cache_control(block, at);
    b.kind = Block::ToolUse;
    const json* id = present(block, "id");
    if (!id) throw bad(at + ".id", "is required");
    b.id = string_value(*id, at + ".id");
    if (b.id.empty()) throw bad(at + ".id", "must not be empty");
    const json* name = present(block, "name");
    if (!name) throw bad(at + ".name", "is required");
    b.name = string_value(*name, at + ".name");
    const json* input = present(block, "input");
    if (!input || !input->is_object()) throw bad(at + ".input", "must be an object");
    b.input = *input;
    return b;
  }
  if (type == "thinking" && role == "assistant") {
    // An earlier answer's thinking (as this server writes it: the signature is empty and never
    // checked) goes back to the template as the turn's reasoning_content.
    refuse_unknown_keys(block, {"type", "thinking", "signature", "cache_control"}, at);
    check_cache_control(block, at);
    b.kind = Block::Thinking;
    const json* thinking = present(block, "thinking");
    if (!thinking) throw bad(at + ".thinking", "is required");
    b.text = string_value(*thinking, at + ".thinking");
    if (const json* sig = present(block, "signature")) string_value(*sig, at + ".signature");
    return b;
  }
  if (type == "tool_result") {
    if (role != "user") throw bad(at + ".type", "tool_result blocks belong in user messages");
    refuse_unknown_keys(block, {"type", "tool_use_id", "content", "is_error", "cache_control"}, at);
    check_cache_control(block, at);
    b.kind = Block::ToolResult;
    const json* id = present(block, "tool_use_id");
    if (!id) throw bad(at + ".tool_use_id", "is required");
    b.id = string_value(*id, at + ".tool_use_id");
    b.text = tool_result_text(block, at);
    if (const json* err = present(block, "is_error")) {
      if (!err->is_boolean()) throw bad(at + ".is_error", "must be a boolean");
      b.is_error = err->get<bool>();
    }
    return b;
  }
  throw bad(at + ".type", fmt::format("'{}' content blocks are not supported ({})", type,
                                      unsupported_block_reason(type)));
}

// messages -> turns, consecutive turns of one role merged (as Anthropic does).
std::vector<Turn> parse_turns(const json& body) {
  const json* messages = present(body, "messages");
  if (!messages) throw bad("messages", "is required");
  if (!messages->is_array()) throw bad("messages", "must be an array");
  if (messages->empty()) throw bad("messages", "must not be empty");
  std::vector<Turn> turns;
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string at = fmt::format("messages[{}]", i);
    const json& m = (*messages)[i];
    if (!m.is_object()) throw bad(at, "must be an object");
    refuse_unknown_keys(m, {"role", "content"}, at);
    const json* role = present(m, "role");
    if (!role || !role->is_string()) throw bad(at + ".role", "is required");
    const std::string r = role->get<std::string>();
    if (r != "user" && r != "assistant")
      throw bad(at + ".role", fmt::format("must be \"user\" or \"assistant\", got '{}' (send the "
                                          "system prompt as the top-level 'system')",
                                          r));
    const json* content = present(m, "content");
    if (!content) throw bad(at + ".content", "is required");
    std::vector<Block> blocks;
    if (content->is_string()) {
      if (!content->get<std::string>().empty())
        blocks.push_back(
            {Block::Text, content->get<std::string>(), "", "", {}, false, at + ".content"});
    } else if (content->is_array()) {
      for (size_t j = 0; j < content->size(); ++j)
        blocks.push_back(parse_block((*content)[j], r, fmt::format("{}.content[{}]", at, j)));
    } else {
      throw bad(at + ".content", "must be a string or an array of content blocks");
    }
    const bool last = i + 1 == messages->size();
    if (blocks.empty() && !(last && r == "assistant"))
      throw bad(at + ".content", "must not be empty (only a final assistant message may be)");
    if (turns.empty() || turns.back().role != r) turns.push_back({r, {}, at});
    for (Block& b : blocks) turns.back().blocks.push_back(std::move(b));
  }
  if (turns.front().role != "user")
    throw bad("messages[0].role", "the first message must be a user message");
  return turns;
}

std::string system_text(const json& body) {
  const json* system = present(body, "system");
  if (!system) return "";
  if (system->is_string()) return system->get<std::string>();
  if (!system->is_array()) throw bad("system", "must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < system->size(); ++i) {
    const std::string at = fmt::format("system[{}]", i);
    const std::string type = block_type((*system)[i], at);
    if (type != "text") throw bad(at + ".type", "the system prompt holds text blocks only");
    text += (text.empty() ? "" : kBlockSeparator) + text_block((*system)[i], at);
  }
  return text;
}

// Ids of tool calls as the chat path keeps them: without Anthropic's "toolu_" (our ids carry the
// parser's, which Mistral's templates insist on, behind it).
std::string internal_call_id(const std::string& id) {
  return id.rfind("toolu_", 0) == 0 && id.size() > 6 ? id.substr(6) : id;
}

ChatMessage chat_message(json raw) {
  ChatMessage m;
  m.role = raw["role"].get<std::string>();
  m.content = raw["content"].is_string() ? raw["content"].get<std::string>() : "";
  m.raw = std::move(raw);
  return m;
}

// Turns into the chat path's messages: user text -> user, tool_result -> tool (in the order
// written), assistant text and tool_use -> one assistant message with tool_calls.
void add_turn(const Turn& t, std::set<std::string>& call_ids, std::vector<ChatMessage>& out) {
  if (t.role == "assistant") {
    std::string text, thinking;
    json calls = json::array();
    for (const Block& b : t.blocks) {
      if (b.kind == Block::Text) {
        text += (text.empty() ? "" : kBlockSeparator) + b.text;
        continue;
      }
      if (b.kind == Block::Thinking) {
        thinking += (thinking.empty() ? "" : kBlockSeparator) + b.text;
        continue;
      }
      call_ids.insert(b.id);
      calls.push_back({{"id", internal_call_id(b.id)},
                       {"type", "function"},
                       {"function", {{"name", b.name}, {"arguments", b.input.dump()}}}});
    }
    json raw = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) raw["reasoning_content"] = thinking;
    if (!calls.empty()) raw["tool_calls"] = std::move(calls);
    out.push_back(chat_message(std::move(raw)));
    return;
  }
  std::string text;
  auto flush_text = [&] {
    if (!text.empty()) out.push_back(chat_message({{"role", "user"}, {"content", text}}));
    text.clear();
  };
  for (const Block& b : t.blocks) {
    if (b.kind == Block::Text) {
      text += (text.empty() ? "" : kBlockSeparator) + b.text;
      continue;
    }
    flush_text();
    if (!call_ids.count(b.id))
      throw bad(
          b.at + ".tool_use_id",
          fmt::format("'{}' is not the id of a tool_use block in an earlier assistant message",
                      b.id));
    // The model is told a result is an error the way a person reading it would be.
    out.push_back(chat_message({{"role", "tool"},
                                {"tool_call_id", internal_call_id(b.id)},
                                {"content", b.is_error ? "Error: " + b.text : b.text}}));
  }
  flush_text();
}

bool valid_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

// tools and tool_choice into the ToolRequest, and the tools as the template gets them.
void parse_tools(const json& body, const ojson* ordered, ChatRequest& r) {
  ToolRequest& tr = r.tool_request;
  if (const json* tools = present(body, "tools")) {
    if (!tools->is_array()) throw bad("tools", "must be an array");
    if (tools->size() > kMaxTools)
      throw bad("tools",
                fmt::format("holds {} tools; at most {} are allowed", tools->size(), kMaxTools));
    r.tools = ojson::array();
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = fmt::format("tools[{}]", i);
      const json& t = (*tools)[i];
      if (!t.is_object()) throw bad(at, "must be an object");
      if (const json* type = present(t, "type"); type && *type != "custom")
        throw bad(at + ".type", fmt::format("server tools ({}) are not supported; give custom "
                                            "tools with a name and an input_schema",
                                            type->dump()));
      refuse_unknown_keys(
          t, {"type", "name", "description", "input_schema", "cache_control", "strict"}, at);
      check_cache_control(t, at);
      ToolDefinition d;
      const json* name = present(t, "name");
      if (!name || !name->is_string() || !valid_tool_name(name->get<std::string>()))
        throw bad(at + ".name", "must be 1 to 64 letters, digits, '_' or '-'");
      d.name = name->get<std::string>();
      if (!names.insert(d.name).second)
        throw bad(at + ".name", fmt::format("two tools are named '{}'", d.name));
      if (const json* desc = present(t, "description"))
        d.description = string_value(*desc, at + ".description");
      // Calls are always held to the schema, so strict: true is what happens anyway.
      if (const json* strict = present(t, "strict"); strict && !strict->is_boolean())
        throw bad(at + ".strict", "must be a boolean");
      const json* schema = present(t, "input_schema");
      if (!schema || !schema->is_object())
        throw bad(at + ".input_schema", "must be a JSON Schema object");
      if (!schema->contains("type") || (*schema)["type"] != "object")
        throw bad(at + ".input_schema.type", "must be \"object\"");
      d.parameters =
          ordered ? (*ordered)["tools"][i]["input_schema"] : ojson::parse(schema->dump());
      r.tools.push_back(
          {{"type", "function"},
           {"function",
            {{"name", d.name}, {"description", d.description}, {"parameters", d.parameters}}}});
      tr.tools.push_back(std::move(d));
    }
  }
  tr.choice = tr.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
  const json* choice = present(body, "tool_choice");
  if (!choice) return;
  if (!choice->is_object() || !choice->contains("type") || !(*choice)["type"].is_string())
    throw bad("tool_choice", "must be an object with a 'type' (auto, any, tool or none)");
  const std::string type = (*choice)["type"].get<std::string>();
  if (type == "tool") {
    refuse_unknown_keys(*choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice");
    const json* name = present(*choice, "name");
    if (!name || !name->is_string())
      throw bad("tool_choice.name", "is required with type \"tool\"");
    tr.choice = ToolChoice::Named;
    tr.named = name->get<std::string>();
    bool known = false;
    for (const auto& t : tr.tools) known |= t.name == tr.named;
    if (!known) throw bad("tool_choice.name", fmt::format("'{}' is not among the tools", tr.named));
  } else if (type == "auto" || type == "any" || type == "none") {
    refuse_unknown_keys(*choice, {"type", "disable_parallel_tool_use"}, "tool_choice");
    if (type == "any" && tr.tools.empty()) throw bad("tool_choice", "\"any\" needs tools");
    if (type == "any") tr.choice = ToolChoice::Required;
    if (type == "none") tr.choice = ToolChoice::None;
  } else {
    throw bad("tool_choice.type", fmt::format("must be auto, any, tool or none, got '{}'", type));
  }
  if (const json* dp = present(*choice, "disable_parallel_tool_use")) {
    if (!dp->is_boolean()) throw bad("tool_choice.disable_parallel_tool_use", "must be a boolean");
    tr.parallel = !dp->get<bool>();
  }
}

GenerationOptions parse_options(const json& body, bool count_tokens) {
  GenerationOptions o;
  const json* max_tokens = present(body, "max_tokens");
  if (!max_tokens && !count_tokens) throw bad("max_tokens", "is required");
  if (max_tokens)
    o.max_tokens =
        int(integer_value(*max_tokens, "max_tokens", 1, std::numeric_limits<int32_t>::max()));
  o.temperature = number_value(body, "temperature", 1.0, 0.0, 1.0);
  o.top_p = number_value(body, "top_p", 1.0, 0.0, 1.0);
  if (const json* k = present(body, "top_k"))
    o.top_k = int(integer_value(*k, "top_k", 0, std::numeric_limits<int32_t>::max()));
  if (const json* stops = present(body, "stop_sequences")) {
    if (!stops->is_array()) throw bad("stop_sequences", "must be an array of strings");
    if (stops->size() > kMaxStopSequences)
      throw bad("stop_sequences", fmt::format("at most {} are allowed", kMaxStopSequences));
    for (size_t i = 0; i < stops->size(); ++i) {
      const std::string at = fmt::format("stop_sequences[{}]", i);
      o.stop.push_back(string_value((*stops)[i], at));
      if (o.stop.back().empty()) throw bad(at, "must not be empty");
    }
  }
  if (const json* stream = present(body, "stream")) {
    if (!stream->is_boolean()) throw bad("stream", "must be a boolean");
    o.stream = stream->get<bool>();
  }
  return o;
}

// The fields accepted because what they ask for is what happens here.
void check_informational(const json& body) {
  if (const json* md = present(body, "metadata")) {
    if (!md->is_object()) throw bad("metadata", "must be an object");
    refuse_unknown_keys(*md, {"user_id"}, "metadata");
    if (const json* uid = present(*md, "user_id")) string_value(*uid, "metadata.user_id");
  }
  if (const json* tier = present(body, "service_tier");
      tier && *tier != "auto" && *tier != "standard_only")
    throw bad("service_tier", "must be \"auto\" or \"standard_only\" (there is one tier)");
  if (const json* thinking = present(body, "thinking")) {
    if (!thinking->is_object() || !thinking->contains("type") || (*thinking)["type"] != "disabled")
      throw bad(
          "thinking",
          "extended thinking is not supported (send {\"type\": \"disabled\"} or leave it out)");
    refuse_unknown_keys(*thinking, {"type"}, "thinking");
  }
}

}  // namespace

AnthropicRequest parse_anthropic_request(const json& body, const ojson* ordered,
                                         bool count_tokens) {
  if (!body.is_object())
    throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
  refuse_unknown_keys(
      body,
      {"model", "max_tokens", "messages", "system", "stop_sequences", "temperature", "top_p",
       "top_k", "stream", "metadata", "tools", "tool_choice", "thinking", "service_tier"},
      "");
  check_informational(body);
  AnthropicRequest a;
  ChatRequest& r = a.chat;
  r.thinking_disabled = present(body, "thinking") != nullptr;  // only "disabled" passes the check
  if (const json* model = present(body, "model")) r.model = string_value(*model, "model");
  r.options = parse_options(body, count_tokens);
  parse_tools(body, ordered, r);
  std::vector<Turn> turns = parse_turns(body);
  if (turns.back().role == "assistant") {
    // A prefill: the answer starts with it. Only text can be continued.
    const Turn& last = turns.back();
    for (const Block& b : last.blocks) {
      if (b.kind != Block::Text)
        throw bad(b.at, "a final assistant message may hold only text (to be continued)");
      a.continuation += (a.continuation.empty() ? "" : kBlockSeparator) + b.text;
    }
    if (!a.continuation.empty() && std::isspace(static_cast<unsigned char>(a.continuation.back())))
      throw bad(last.at + ".content", "a final assistant message must not end with whitespace");
    // A continued answer is not split into thinking and text (where it stands is the client's).
    if (!a.continuation.empty()) r.reasoning_format = ReasoningFormat::None;
    const ToolChoice c = r.tool_request.choice;
    if (!a.continuation.empty() && (c == ToolChoice::Required || c == ToolChoice::Named))
      throw bad("tool_choice",
                "a final assistant message (to be continued) cannot be combined "
                "with tool_choice \"any\" or \"tool\"");
    turns.pop_back();
  }
  if (const std::string system = system_text(body); !system.empty())
    r.messages.push_back(chat_message({{"role", "system"}, {"content", system}}));
  std::set<std::string> call_ids;
  for (const Turn& t : turns) add_turn(t, call_ids, r.messages);
  return a;
}

bool is_anthropic_path(std::string_view path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0;
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

ojson anthropic_error_body(const ApiError& e) {
  return {{"type", "error"},
          {"error", {{"type", anthropic_error_type(e.status())}, {"message", e.what()}}}};
}

const char* anthropic_stop_reason(const ChoiceText& c, const AnthropicEnding& ending) {
  if (c.finish_reason == "length")
    return ending.context_bound ? "model_context_window_exceeded" : "max_tokens";
  if (!c.tool_calls.empty()) return "tool_use";
  if (c.stop_sequence)
    for (const std::string& s : ending.stops)
      if (s == *c.stop_sequence) return "stop_sequence";
  return "end_turn";
}

std::string anthropic_tool_use_id(const std::string& call_id) {
  return "toolu_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id);
}

namespace {

ojson tool_use_block(const ToolCall& call) {
  ojson input = ojson::parse(call.arguments, nullptr, false);
  if (!input.is_object()) input = ojson::object();  // the parser hands out objects only
  return {{"type", "tool_use"},
          {"id", anthropic_tool_use_id(call.id)},
          {"name", call.name},
          {"input", std::move(input)}};
}

ojson stop_sequence_json(const char* reason, const ChoiceText& c) {
  return std::string_view(reason) == "stop_sequence" ? ojson(*c.stop_sequence) : ojson(nullptr);
}

}  // namespace

ojson anthropic_message(const ResponseInfo& info, const ChoiceText& c, const Usage& usage,
                        const AnthropicEnding& ending) {
  ojson content = ojson::array();
  // A thinking model's reasoning first, as a thinking block (its signature empty: nothing here
  // signs it), as llama-server writes it.
  if (!c.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", c.reasoning}, {"signature", ""}});
  if (!c.text.empty()) content.push_back({{"type", "text"}, {"text", c.text}});
  for (const ToolCall& call : c.tool_calls) content.push_back(tool_use_block(call));
  const char* reason = anthropic_stop_reason(c, ending);
  return {{"id", info.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", info.model},
          {"content", std::move(content)},
          {"stop_reason", reason},
          {"stop_sequence", stop_sequence_json(reason, c)},
          {"usage",
           {{"input_tokens", usage.prompt_tokens}, {"output_tokens", usage.completion_tokens}}}};
}

std::string anthropic_sse(const char* event, const ojson& data) {
  return fmt::format("event: {}\ndata: {}\n\n", event,
                     data.dump(-1, ' ', false, ojson::error_handler_t::replace));
}

AnthropicStream::AnthropicStream(ResponseInfo info, AnthropicEnding ending, int64_t input_tokens)
    : info_(std::move(info)), ending_(std::move(ending)), input_tokens_(input_tokens) {
  if (info_.answer.parsed()) parser_.emplace(info_.answer);
}

std::string AnthropicStream::start() {
  const ojson message = {{"id", info_.id},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", info_.model},
                         {"content", ojson::array()},
                         {"stop_reason", nullptr},
                         {"stop_sequence", nullptr},
                         {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
  return anthropic_sse("message_start", {{"type", "message_start"}, {"message", message}}) +
         anthropic_sse("ping", {{"type", "ping"}});
}

std::string AnthropicStream::thinking(const std::string& piece) {
  if (piece.empty()) return "";
  std::string out;
  if (!thinking_open_) {
    out += close_block();
    out += anthropic_sse("content_block_start",
                         {{"type", "content_block_start"},
                          {"index", next_index_},
                          {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
    thinking_open_ = true;
    ++next_index_;
  }
  so_far_.reasoning += piece;
  return out + anthropic_sse("content_block_delta",
                             {{"type", "content_block_delta"},
                              {"index", next_index_ - 1},
                              {"delta", {{"type", "thinking_delta"}, {"thinking", piece}}}});
}

std::string AnthropicStream::text(const std::string& piece) {
  if (piece.empty()) return "";
  std::string out = close_thinking();
  if (!text_open_) {
    out +=
        anthropic_sse("content_block_start", {{"type", "content_block_start"},
                                              {"index", next_index_},
                                              {"content_block", {{"type", "text"}, {"text", ""}}}});
    text_open_ = true;
    ++next_index_;
  }
  so_far_.text += piece;
  return out + anthropic_sse("content_block_delta",
                             {{"type", "content_block_delta"},
                              {"index", next_index_ - 1},
                              {"delta", {{"type", "text_delta"}, {"text", piece}}}});
}

std::string AnthropicStream::close_thinking() {
  if (!thinking_open_) return "";
  thinking_open_ = false;
  // Anthropic's clients expect a signature before a thinking block ends (empty here).
  return anthropic_sse("content_block_delta",
                       {{"type", "content_block_delta"},
                        {"index", next_index_ - 1},
                        {"delta", {{"type", "signature_delta"}, {"signature", ""}}}}) +
         anthropic_sse("content_block_stop",
                       {{"type", "content_block_stop"}, {"index", next_index_ - 1}});
}

std::string AnthropicStream::close_block() {
  if (thinking_open_) return close_thinking();
  if (!text_open_) return "";
  text_open_ = false;
  return anthropic_sse("content_block_stop",
                       {{"type", "content_block_stop"}, {"index", next_index_ - 1}});
}

std::string AnthropicStream::tool_use(const ToolCall& call) {
  std::string out = close_block();
  ojson block = tool_use_block(call);
  const std::string input = block["input"].dump();
  block["input"] = ojson::object();  // the input comes as deltas, as Anthropic streams it
  const int index = next_index_++;
  out +=
      anthropic_sse("content_block_start",
                    {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
  out += anthropic_sse("content_block_delta",
                       {{"type", "content_block_delta"},
                        {"index", index},
                        {"delta", {{"type", "input_json_delta"}, {"partial_json", input}}}});
  out += anthropic_sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  so_far_.tool_calls.push_back(call);
  return out;
}

std::string AnthropicStream::push(const JobEvent& ev) {
  if (ev.index != 0) return "";  // one message per request (n is 1)
  if (ev.finish_reason) so_far_.finish_reason = *ev.finish_reason;
  if (ev.stop_sequence) so_far_.stop_sequence = ev.stop_sequence;
  if (!parser_) return text(ev.text);
  AnswerPiece a = parser_->push(ev.text);
  if (ev.finish_reason) {
    AnswerPiece rest = parser_->finish();
    a.reasoning += rest.reasoning;
    a.content += rest.content;
    for (ToolCall& c : rest.calls) a.calls.push_back(std::move(c));
  }
  std::string out = thinking(a.reasoning);
  out += text(a.content);
  for (const ToolCall& call : a.calls) out += tool_use(call);
  return out;
}

std::string AnthropicStream::finish(const Usage& usage) {
  std::string out = close_block();
  const char* reason = anthropic_stop_reason(so_far_, ending_);
  out += anthropic_sse(
      "message_delta",
      {{"type", "message_delta"},
       {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_sequence_json(reason, so_far_)}}},
       {"usage",
        {{"input_tokens", usage.prompt_tokens}, {"output_tokens", usage.completion_tokens}}}});
  return out + anthropic_sse("message_stop", {{"type", "message_stop"}});
}

std::string AnthropicStream::fail(const ApiError& error) {
  return anthropic_sse("error", anthropic_error_body(error));
}

}  // namespace jitllm::server
