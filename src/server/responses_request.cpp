// The Responses API's request into a chat request (see responses_request.h).
#include "server/responses_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <set>

namespace jitllm::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const ojson* present(const ojson& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

const char* type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::boolean: return "boolean";
    case ojson::value_t::string: return "string";
    case ojson::value_t::array: return "array";
    case ojson::value_t::object: return "object";
    case ojson::value_t::number_float: return "number";
    default: return "integer";
  }
}

ApiError type_error(const std::string& param, const char* expected, const ojson& got) {
  return invalid_request(param, fmt::format("'{}' must be {}, got {}", param, expected, type_name(got)));
}

ApiError refuse(const std::string& param, const std::string& why) {
  return invalid_request(param, fmt::format("'{}' is not supported by this server: {}", param, why));
}

std::string string_at(const ojson& o, const char* key, const std::string& at, bool required) {
  const ojson* v = present(o, key);
  if (!v) {
    if (required) throw invalid_request(at + "." + key, fmt::format("'{}.{}' is required", at, key));
    return "";
  }
  if (!v->is_string()) throw type_error(at + "." + key, "a string", *v);
  return v->get<std::string>();
}

// Fields the chat parser reads under the same name and validates: OpenAI's, and the sampling
// extensions llama-server and vLLM take beside them.
const char* const kPassThrough[] = {
    "model", "temperature", "top_p", "parallel_tool_calls", "stream", "seed", "top_k", "min_p",
    "typical_p", "presence_penalty", "frequency_penalty", "repeat_penalty", "repeat_last_n",
    "logit_bias", "stop", "ignore_eos"};

// Fields read here.
const char* const kOwn[] = {"input", "instructions", "max_output_tokens", "tools", "tool_choice",
                            "text", "metadata", "user", "safety_identifier", "prompt_cache_key",
                            "stream_options", "include", "top_logprobs", "truncation",
                            "reasoning"};

// Fields of OpenAI's API that this server does not honour: their no-op values pass, any other
// is refused by name.
struct Unhonoured {
  const char* name;
  bool (*fine)(const ojson&);
  const char* why;
};
bool absent(const ojson& v) { return v.is_null(); }
bool null_or_false(const ojson& v) { return v.is_null() || v == false; }
const Unhonoured kUnhonoured[] = {
    {"previous_response_id", absent,
     "responses are not stored; send the whole conversation in 'input'"},
    {"conversation", absent, "conversations are not stored; send the whole conversation in 'input'"},
    {"store", null_or_false, "responses are not stored (send false or leave it out)"},
    {"background", null_or_false, "responses are answered while the request waits"},
    {"prompt", absent, "there are no stored prompts"},
    {"max_tool_calls", absent, "use parallel_tool_calls: false for one call"},
    {"service_tier", [](const ojson& v) { return v.is_null() || v == "auto" || v == "default"; },
     "there is one service tier"},
};

void check_fields(const ojson& body) {
  std::set<std::string> known;
  for (const char* f : kPassThrough) known.insert(f);
  for (const char* f : kOwn) known.insert(f);
  for (const Unhonoured& u : kUnhonoured) {
    known.insert(u.name);
    if (const ojson* v = present(body, u.name); v && !u.fine(*v)) throw refuse(u.name, u.why);
  }
  for (const auto& [key, value] : body.items())
    if (!known.count(key))
      throw ApiError(400, "invalid_request_error",
                     fmt::format("unknown parameter '{}' for /v1/responses", key), key,
                     "unknown_parameter");
}

// An object of the request with a key outside `keys`: refused by name, as OpenAI does (a key we
// would drop is a key we would not honour).
void only_keys(const ojson& o, const std::string& at, std::initializer_list<const char*> keys) {
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& key = it.key();
    if (std::find_if(keys.begin(), keys.end(), [&](const char* k) { return key == k; }) == keys.end())
      throw ApiError(400, "invalid_request_error",
                     fmt::format("unknown parameter '{}.{}'", at, key), at + "." + key,
                     "unknown_parameter");
  }
}

// The text of a message's content: a string, or text parts (input_text, output_text).
std::string content_text(const ojson& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw type_error(at, "a string or an array of content parts", content);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string part_at = fmt::format("{}[{}]", at, j);
    const ojson& part = content[j];
    if (!part.is_object()) throw type_error(part_at, "an object", part);
    const std::string type = string_at(part, "type", part_at, true);
    if (type == "input_text" || type == "output_text") {
      // An output_text part of an earlier response comes back with what the server wrote in it.
      if (type == "input_text") only_keys(part, part_at, {"type", "text"});
      else only_keys(part, part_at, {"type", "text", "annotations", "logprobs"});
      text += string_at(part, "text", part_at, true);
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw invalid_request(part_at + ".type", fmt::format("'{}' parts are not supported: this "
                                                           "server serves text-only models", type));
    } else {
      throw invalid_request(part_at + ".type",
                            fmt::format("content part type '{}' is not supported (input_text, "
                                        "output_text are)", type));
    }
  }
  return text;
}

// `input` into chat messages, with where each came from.
void add_input(const ojson& input, ojson& messages, std::vector<std::string>& origin) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    origin.push_back("input");
    return;
  }
  if (!input.is_array()) throw type_error("input", "a string or an array of items", input);
  if (input.empty()) throw invalid_request("input", "'input' must not be empty");
  std::set<std::string> call_ids;
  bool last_is_call_turn = false;  // the last message is an assistant turn made from items
  bool last_is_reasoning = false;  // ... made from a reasoning item alone (its text may follow)
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string at = fmt::format("input[{}]", i);
    const ojson& item = input[i];
    if (!item.is_object()) throw type_error(at, "an object", item);
    // A message may leave out its type ({"role", "content"}, OpenAI's easy input message).
    const std::string type = present(item, "type") ? string_at(item, "type", at, true) : "message";
    // Items of an earlier response's output come back with their id and status.
    if (type == "message") {
      only_keys(item, at, {"type", "role", "content", "id", "status"});
      std::string role = string_at(item, "role", at, true);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        throw invalid_request(at + ".role", fmt::format("unknown role '{}' (user, assistant, "
                                                        "system, developer)", role));
      // Chat templates know system, not developer (OpenAI treats them alike for these models).
      if (role == "developer") role = "system";
      const ojson* content = present(item, "content");
      if (!content) throw invalid_request(at + ".content", fmt::format("'{}.content' is required", at));
      const std::string text = content_text(*content, at + ".content");
      if (last_is_reasoning && role == "assistant") {
        messages.back()["content"] = text;  // the answer after its reasoning: one turn
      } else {
        messages.push_back({{"role", role}, {"content", text}});
        origin.push_back(at);
      }
      last_is_call_turn = role == "assistant";
      last_is_reasoning = false;
    } else if (type == "function_call") {
      only_keys(item, at, {"type", "call_id", "name", "arguments", "id", "status"});
      const std::string call_id = string_at(item, "call_id", at, true);
      ojson call = {{"id", call_id},
                    {"type", "function"},
                    {"function", {{"name", string_at(item, "name", at, true)},
                                  {"arguments", string_at(item, "arguments", at, true)}}}};
      call_ids.insert(call_id);
      // Calls of one turn (and the text before them) are one assistant message.
      if (last_is_call_turn) {
        ojson& last = messages.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = ojson::array();
        last["tool_calls"].push_back(std::move(call));
      } else {
        messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}});
        origin.push_back(at);
        last_is_call_turn = true;
      }
      last_is_reasoning = false;
    } else if (type == "function_call_output") {
      only_keys(item, at, {"type", "call_id", "output", "id", "status"});
      const std::string call_id = string_at(item, "call_id", at, true);
      if (!call_ids.count(call_id))
        throw invalid_request(at + ".call_id",
                              fmt::format("no function_call item with call_id '{}' comes before "
                                          "this output", call_id));
      const ojson* output = present(item, "output");
      if (!output) throw invalid_request(at + ".output", fmt::format("'{}.output' is required", at));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", call_id},
                          {"content", content_text(*output, at + ".output")}});
      origin.push_back(at);
      last_is_call_turn = false;
      last_is_reasoning = false;
    } else if (type == "reasoning") {
      // An earlier response's reasoning: the assistant turn's reasoning_content, which the
      // template renders where it wants it (the text and calls that follow join the turn).
      only_keys(item, at, {"type", "id", "summary", "content", "encrypted_content", "status"});
      if (present(item, "encrypted_content"))
        throw refuse(at + ".encrypted_content", "this server writes no encrypted reasoning; send "
                                                "its reasoning_text content");
      if (const ojson* sm = present(item, "summary"); sm && !(sm->is_array() && sm->empty()))
        throw refuse(at + ".summary", "this server writes no reasoning summaries; send the "
                                      "reasoning_text content");
      std::string text;
      if (const ojson* content = present(item, "content")) {
        if (!content->is_array()) throw type_error(at + ".content", "an array", *content);
        for (size_t j = 0; j < content->size(); ++j) {
          const std::string part_at = fmt::format("{}.content[{}]", at, j);
          const ojson& part = (*content)[j];
          if (!part.is_object()) throw type_error(part_at, "an object", part);
          only_keys(part, part_at, {"type", "text"});
          if (string_at(part, "type", part_at, true) != "reasoning_text")
            throw invalid_request(part_at + ".type", "reasoning content parts are reasoning_text");
          text += string_at(part, "text", part_at, true);
        }
      }
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", text}});
      origin.push_back(at);
      last_is_call_turn = true;
      last_is_reasoning = true;
    } else if (type == "item_reference") {
      throw refuse(at + ".type", "items are not stored; send the item itself");
    } else {
      throw refuse(at + ".type", fmt::format("'{}' items (message, reasoning, function_call "
                                             "and function_call_output are supported)", type));
    }
  }
}

// Flat function tools into the chat shape; the echo keeps the flat shape, strict filled in
// (calls are always held to the schema).
void add_tools(const ojson& tools, ojson& chat, ojson& echo) {
  if (!tools.is_array()) throw type_error("tools", "an array", tools);
  ojson chat_tools = ojson::array(), echoed = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = fmt::format("tools[{}]", i);
    const ojson& t = tools[i];
    if (!t.is_object()) throw type_error(at, "an object", t);
    const std::string type = string_at(t, "type", at, true);
    if (type != "function")
      throw refuse(at + ".type", fmt::format("'{}' tools (only function tools run here; built-in "
                                             "tools such as web_search, file_search, "
                                             "code_interpreter or computer_use do not)", type));
    only_keys(t, at, {"type", "name", "description", "parameters", "strict"});
    ojson fn = ojson::object();
    for (const char* key : {"name", "description", "parameters", "strict"})
      if (const ojson* v = present(t, key)) fn[key] = *v;
    chat_tools.push_back({{"type", "function"}, {"function", fn}});
    ojson e = {{"type", "function"}};
    e["name"] = fn.value("name", ojson());
    e["description"] = fn.value("description", ojson());
    e["parameters"] = fn.value("parameters", ojson());
    e["strict"] = fn.value("strict", ojson(true));
    echoed.push_back(std::move(e));
  }
  chat["tools"] = std::move(chat_tools);
  echo["tools"] = std::move(echoed);
}

ojson chat_tool_choice(const ojson& choice) {
  if (choice.is_string()) return choice;  // none | auto | required, checked by the chat parser
  if (!choice.is_object()) throw type_error("tool_choice", "a string or an object", choice);
  const std::string type = string_at(choice, "type", "tool_choice", true);
  if (type == "function") {
    only_keys(choice, "tool_choice", {"type", "name"});
    return {{"type", "function"}, {"function", {{"name", string_at(choice, "name", "tool_choice", true)}}}};
  }
  if (type == "allowed_tools")
    throw refuse("tool_choice", "allowed_tools (list the allowed functions in 'tools')");
  throw refuse("tool_choice", fmt::format("'{}' (only function tools run here)", type));
}

// text.format into a response_format.
void add_text_config(const ojson& text, ojson& chat, ojson& echo) {
  if (!text.is_object()) throw type_error("text", "an object", text);
  for (const auto& [key, value] : text.items())
    if (key != "format" && key != "verbosity")
      throw ApiError(400, "invalid_request_error", fmt::format("unknown parameter 'text.{}'", key),
                     "text." + key, "unknown_parameter");
  if (const ojson* v = present(text, "verbosity"); v && *v != "medium")
    throw refuse("text.verbosity", "the model's verbosity is not adjustable");
  const ojson* format = present(text, "format");
  if (!format) return;
  if (!format->is_object()) throw type_error("text.format", "an object", *format);
  const std::string type = string_at(*format, "type", "text.format", true);
  if (type == "text") {
    only_keys(*format, "text.format", {"type"});
  } else if (type == "json_object") {
    only_keys(*format, "text.format", {"type"});
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    only_keys(*format, "text.format", {"type", "name", "description", "schema", "strict"});
    ojson js = ojson::object();
    js["name"] = string_at(*format, "name", "text.format", false);
    string_at(*format, "description", "text.format", false);
    if (const ojson* schema = present(*format, "schema")) js["schema"] = *schema;
    if (const ojson* strict = present(*format, "strict")) js["strict"] = *strict;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
  } else {
    throw invalid_request("text.format.type", fmt::format("'text.format.type' must be text, "
                                                          "json_object or json_schema, got '{}'",
                                                          type));
  }
  echo["text"] = {{"format", *format}};
}

// include: the output's log probabilities are the one extra that exists here; top_logprobs
// alone asks for them too.
void add_logprobs(const ojson& body, ojson& chat, ojson& echo) {
  if (const ojson* include = present(body, "include")) {
    if (!include->is_array()) throw type_error("include", "an array", *include);
    for (size_t j = 0; j < include->size(); ++j) {
      const ojson& what = (*include)[j];
      const std::string at = fmt::format("include[{}]", j);
      if (!what.is_string()) throw type_error(at, "a string", what);
      if (what != "message.output_text.logprobs")
        throw refuse(at, fmt::format("'{}' (message.output_text.logprobs is the one output "
                                     "that can be included)", what.get<std::string>()));
      chat["logprobs"] = true;
    }
  }
  echo["top_logprobs"] = 0;
  if (const ojson* top = present(body, "top_logprobs")) {
    chat["top_logprobs"] = *top;  // its range is checked by the chat parser
    if (top->is_number() && top->get<double>() > 0) chat["logprobs"] = true;
    echo["top_logprobs"] = *top;
  }
}

void check_informational(const ojson& body) {
  if (const ojson* m = present(body, "metadata")) {
    if (!m->is_object()) throw type_error("metadata", "an object", *m);
    if (m->size() > 16) throw invalid_request("metadata", "'metadata' holds at most 16 keys");
    for (const auto& [key, value] : m->items())
      if (key.size() > 64 || !value.is_string() || value.get<std::string>().size() > 512)
        throw invalid_request("metadata", "'metadata' maps keys of at most 64 characters to "
                                          "strings of at most 512");
  }
  for (const char* name : {"user", "safety_identifier", "prompt_cache_key"})
    if (const ojson* v = present(body, name); v && !v->is_string()) throw type_error(name, "a string", *v);
  if (const ojson* so = present(body, "stream_options")) {
    if (!so->is_object()) throw type_error("stream_options", "an object", *so);
    for (const auto& [key, value] : so->items()) {
      // Obfuscation pads events against length side channels; events here carry none.
      if (key != "include_obfuscation")
        throw ApiError(400, "invalid_request_error",
                       fmt::format("unknown parameter 'stream_options.{}'", key),
                       "stream_options." + key, "unknown_parameter");
      if (!value.is_boolean() && !value.is_null())
        throw type_error("stream_options.include_obfuscation", "a boolean", value);
    }
  }
}

}  // namespace

ResponsesRequest parse_responses_request(const ojson& body) {
  if (!body.is_object())
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body must be a JSON object, got {}", type_name(body)));
  check_fields(body);
  check_informational(body);
  ResponsesRequest r;
  ojson chat = ojson::object();
  for (const char* name : kPassThrough)
    if (const ojson* v = present(body, name)) chat[name] = *v;
  if (const ojson* v = present(body, "max_output_tokens")) chat["max_completion_tokens"] = *v;

  ojson& echo = r.echo;
  echo["background"] = false;
  echo["instructions"] = nullptr;
  ojson messages = ojson::array();
  if (const ojson* instructions = present(body, "instructions")) {
    if (!instructions->is_string()) throw type_error("instructions", "a string", *instructions);
    messages.push_back({{"role", "system"}, {"content", *instructions}});
    r.message_origin.push_back("instructions");
    echo["instructions"] = *instructions;
  }
  const ojson* input = present(body, "input");
  if (!input) throw invalid_request("input", "'input' is required");
  add_input(*input, messages, r.message_origin);
  chat["messages"] = std::move(messages);

  // Explicit nulls read as the defaults (the SDK sends null for "unset").
  auto given_or = [&](const char* name, ojson fallback) {
    const ojson* v = present(body, name);
    return v ? *v : fallback;
  };
  echo["max_output_tokens"] = given_or("max_output_tokens", nullptr);
  echo["metadata"] = given_or("metadata", ojson::object());
  echo["parallel_tool_calls"] = given_or("parallel_tool_calls", true);
  echo["previous_response_id"] = nullptr;
  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  if (const ojson* rs = present(body, "reasoning")) {
    if (!rs->is_object()) throw type_error("reasoning", "an object", *rs);
    only_keys(*rs, "reasoning", {"effort", "summary", "generate_summary"});
    for (const char* summary : {"summary", "generate_summary"})
      if (present(*rs, summary))
        throw refuse(fmt::format("reasoning.{}", summary),
                     "this server writes no reasoning summaries (the reasoning comes whole, as "
                     "reasoning_text)");
    // Checked against the model's template on the chat path (renamed back in errors).
    if (const ojson* effort = present(*rs, "effort")) {
      chat["reasoning_effort"] = *effort;
      echo["reasoning"]["effort"] = *effort;
    }
  }
  echo["service_tier"] = "default";
  echo["store"] = false;
  echo["temperature"] = given_or("temperature", 1.0);
  echo["text"] = {{"format", {{"type", "text"}}}};
  if (const ojson* text = present(body, "text")) add_text_config(*text, chat, echo);
  echo["tool_choice"] = "auto";
  echo["tools"] = ojson::array();
  if (const ojson* tools = present(body, "tools")) add_tools(*tools, chat, echo);
  if (const ojson* choice = present(body, "tool_choice")) {
    chat["tool_choice"] = chat_tool_choice(*choice);
    echo["tool_choice"] = *choice;
  }
  add_logprobs(body, chat, echo);
  echo["top_p"] = given_or("top_p", 1.0);
  echo["truncation"] = "disabled";
  if (const ojson* t = present(body, "truncation")) {
    if (*t != "auto" && *t != "disabled")
      throw invalid_request("truncation", "'truncation' must be \"auto\" or \"disabled\"");
    r.truncate = *t == "auto";
    echo["truncation"] = *t;
  }
  echo["user"] = given_or("user", nullptr);

  const json plain = json::parse(chat.dump());
  try {
    r.chat = parse_chat_request(plain, &chat);
  } catch (const ApiError& e) {
    throw responses_error(e, r.message_origin);
  }
  r.stream = r.chat.options.stream;
  return r;
}

std::vector<size_t> truncation_starts(const std::vector<ChatMessage>& messages) {
  size_t first = 0;
  while (first < messages.size() && messages[first].role == "system") ++first;
  std::vector<size_t> starts;
  for (size_t i = first + 1; i < messages.size(); ++i)
    if (messages[i].role == "user") starts.push_back(i);
  return starts;
}

ResponsesRequest truncated(const ResponsesRequest& request, size_t start) {
  ResponsesRequest r = request;
  size_t first = 0;
  while (first < r.chat.messages.size() && r.chat.messages[first].role == "system") ++first;
  if (start <= first || start >= r.chat.messages.size()) return r;
  r.chat.messages.erase(r.chat.messages.begin() + long(first), r.chat.messages.begin() + long(start));
  r.message_origin.erase(r.message_origin.begin() + long(first), r.message_origin.begin() + long(start));
  return r;
}

namespace {

std::string responses_param(const std::string& p, const std::vector<std::string>& origin) {
  auto starts = [&](const std::string& prefix) { return p.compare(0, prefix.size(), prefix) == 0; };
  auto ends = [&](const std::string& suffix) {
    return p.size() >= suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (p == "max_tokens" || p == "max_completion_tokens") return "max_output_tokens";
  if (p == "messages") return "input";
  if (p == "reasoning_effort") return "reasoning.effort";
  if (starts("messages[")) {
    const size_t close = p.find(']');
    if (close == std::string::npos) return "input";
    const size_t index = std::strtoul(p.c_str() + 9, nullptr, 10);
    if (index >= origin.size()) return "input";
    const std::string& from = origin[index];
    // The string forms are the field itself; an item's sub-fields keep their names.
    if (from == "instructions" || from == "input") return from;
    const std::string rest = p.substr(close + 1);
    return rest == ".content" || rest == ".role" ? from + rest : from;
  }
  if (starts("response_format")) {
    if (ends(".schema")) return "text.format.schema";
    if (ends(".strict")) return "text.format.strict";
    return "text.format";
  }
  if (starts("tools[")) {
    std::string q = p;
    if (const size_t at = q.find(".function"); at != std::string::npos) q.erase(at, 9);
    return q;
  }
  return p;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

ApiError responses_error(const ApiError& e, const std::vector<std::string>& message_origin) {
  const json body = e.body()["error"];
  const std::string param = body["param"].is_string() ? body["param"].get<std::string>() : "";
  const std::string renamed = responses_param(param, message_origin);
  std::string message = e.what();
  // The chat route's words for what is text.format here.
  if (renamed == param && message.find("response_format") == std::string::npos) return e;
  replace_all(message, "response_format", "text.format");
  replace_all(message, "'" + param + "'", "'" + renamed + "'");
  if (param == "max_tokens" || param == "max_completion_tokens") replace_all(message, param, renamed);
  return ApiError(e.status(), body["type"].get<std::string>(), message, renamed,
                  body["code"].is_string() ? body["code"].get<std::string>() : "");
}

}  // namespace jitllm::server
