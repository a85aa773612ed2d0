// Tool calls out of a streamed output (see tool_call_parser.h).
#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <optional>

namespace jitllm::server {

namespace {

using ojson = nlohmann::ordered_json;

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_space(std::string_view s, size_t at) {
  while (at < s.size() && space(s[at])) ++at;
  return at;
}

// Bytes at the end of `s` (from `from`) that could be the start of a trigger.
size_t partial_trigger(std::string_view s, size_t from, const std::vector<GrammarTrigger>& ts) {
  size_t hold = 0;
  for (const GrammarTrigger& g : ts)
    for (size_t n = std::min(g.text.size() - 1, s.size() - from); n > hold; --n)
      if (s.substr(s.size() - n) == std::string_view(g.text).substr(0, n)) {
        hold = n;
        break;
      }
  return hold;
}

enum class Step { Done, Wait, Bad };

// `s` at `at` starts with `lit`: Done (at moves past it); Wait while `s` ends inside it.
Step expect(std::string_view s, size_t& at, std::string_view lit, bool final) {
  const std::string_view rest = s.substr(at);
  if (rest.substr(0, lit.size()) == lit) {
    at += lit.size();
    return Step::Done;
  }
  if (!final && rest.size() < lit.size() && lit.substr(0, rest.size()) == rest) return Step::Wait;
  return Step::Bad;
}

// The JSON value at `at`, parsed (Wait while incomplete).
Step json_at(std::string_view s, size_t& at, bool final, ojson& out) {
  at = skip_space(s, at);
  const size_t end = json_value_end(s.substr(at));
  if (end == std::string::npos) return final ? Step::Bad : Step::Wait;
  out = ojson::parse(s.substr(at, end), nullptr, false);
  if (out.is_discarded()) return Step::Bad;
  at += end;
  return Step::Done;
}

// name + arguments of a call object (arguments under `key`, or written as a JSON string).
std::optional<ToolCall> call_of(const ojson& o, const char* key) {
  if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end()) it = o.find("arguments");
  if (it == o.end()) return std::nullopt;
  ojson args = *it;
  if (args.is_string()) args = ojson::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return std::nullopt;
  return ToolCall{"", o["name"].get<std::string>(), args.dump()};
}

using StringArgs = std::map<std::string, std::set<std::string>>;

// The text between `at` and `close` (moved past it); Wait while `close` has not come.
Step until(std::string_view s, size_t& at, std::string_view close, bool final, std::string& text) {
  const size_t end = s.find(close, at);
  if (end == std::string::npos) return final ? Step::Bad : Step::Wait;
  text = std::string(s.substr(at, end - at));
  at = end + close.size();
  return Step::Done;
}

// GLM's <tool_call>NAME <arg_key>K</arg_key> <arg_value>V</arg_value> ... </tool_call>.
Step parse_glm(std::string_view s, size_t& at, bool final, const StringArgs& strings,
               std::vector<ToolCall>& out) {
  Step st;
  if ((st = expect(s, at, "<tool_call>", final)) != Step::Done) return st;
  size_t name_end = std::min({s.find('\n', at), s.find("<arg_key>", at), s.find("</tool_call>", at)});
  if (name_end == std::string::npos) return final ? Step::Bad : Step::Wait;
  std::string_view name = s.substr(at, name_end - at);
  while (!name.empty() && space(name.back())) name.remove_suffix(1);
  while (!name.empty() && space(name.front())) name.remove_prefix(1);
  if (name.empty()) return Step::Bad;
  at = name_end;
  const auto raw = strings.find(std::string(name));
  ojson args = ojson::object();
  while (true) {
    at = skip_space(s, at);
    if ((st = expect(s, at, "</tool_call>", final)) == Step::Done) break;
    if (st == Step::Wait) return st;
    std::string key, value;
    if ((st = expect(s, at, "<arg_key>", final)) != Step::Done) return st;
    if ((st = until(s, at, "</arg_key>", final, key)) != Step::Done) return st;
    at = skip_space(s, at);
    if ((st = expect(s, at, "<arg_value>", final)) != Step::Done) return st;
    if ((st = until(s, at, "</arg_value>", final, value)) != Step::Done) return st;
    // A string argument is its text; anything else is JSON when it reads as JSON.
    if (raw != strings.end() && raw->second.count(key)) {
      args[key] = value;  // even "null" or "12": the schema says a string
    } else {
      const ojson v = ojson::parse(value, nullptr, false);
      args[key] = v.is_discarded() ? ojson(value) : v;
    }
  }
  out.push_back(ToolCall{"", std::string(name), args.dump()});
  return Step::Done;
}

// One call (or, for MistralList, the whole list) at `at`.
Step parse_one(ToolSyntax syntax, std::string_view s, size_t& at, bool final,
               const StringArgs& strings, std::vector<ToolCall>& out) {
  Step st;
  ojson value;
  switch (syntax) {
    case ToolSyntax::Hermes:
    case ToolSyntax::Generic: {
      if ((st = expect(s, at, "<tool_call>", final)) != Step::Done) return st;
      if ((st = json_at(s, at, final, value)) != Step::Done) return st;
      at = skip_space(s, at);
      if ((st = expect(s, at, "</tool_call>", final)) != Step::Done) return st;
      auto call = call_of(value, "arguments");
      if (!call) return Step::Bad;
      out.push_back(std::move(*call));
      return Step::Done;
    }
    case ToolSyntax::Llama3: {
      if (expect(s, at, "<|python_tag|>", final) == Step::Wait) return Step::Wait;
      if ((st = json_at(s, at, final, value)) != Step::Done) return st;
      auto call = call_of(value, "parameters");
      if (!call) return Step::Bad;
      out.push_back(std::move(*call));
      return Step::Done;
    }
    case ToolSyntax::MistralList: {
      if ((st = expect(s, at, "[TOOL_CALLS]", final)) != Step::Done) return st;
      if ((st = json_at(s, at, final, value)) != Step::Done) return st;
      if (!value.is_array() || value.empty()) return Step::Bad;
      std::vector<ToolCall> calls;
      for (const ojson& c : value) {
        auto call = call_of(c, "arguments");
        if (!call) return Step::Bad;
        calls.push_back(std::move(*call));
      }
      for (auto& c : calls) out.push_back(std::move(c));
      return Step::Done;
    }
    case ToolSyntax::MistralArgs: {
      if ((st = expect(s, at, "[TOOL_CALLS]", final)) != Step::Done) return st;
      const size_t args = s.find("[ARGS]", at);
      if (args == std::string::npos) return final ? Step::Bad : Step::Wait;
      std::string_view name = s.substr(at, args - at);
      if (const size_t id = name.find("[CALL_ID]"); id != std::string::npos) name = name.substr(0, id);
      at = args + 6;
      if (name.empty()) return Step::Bad;
      if ((st = json_at(s, at, final, value)) != Step::Done) return st;
      if (!value.is_object()) return Step::Bad;
      out.push_back(ToolCall{"", std::string(name), value.dump()});
      return Step::Done;
    }
    case ToolSyntax::DeepSeekV31: {
      // One call at a time, so the calls complete before a cut stay calls: the block's begin
      // (before the first), the call, and the block's end read as a unit of its own.
      static const std::string begin = "<\uFF5Ctool\u2581calls\u2581begin\uFF5C>";
      static const std::string end = "<\uFF5Ctool\u2581calls\u2581end\uFF5C>";
      static const std::string call_begin = "<\uFF5Ctool\u2581call\u2581begin\uFF5C>";
      static const std::string call_end = "<\uFF5Ctool\u2581call\u2581end\uFF5C>";
      static const std::string sep = "<\uFF5Ctool\u2581sep\uFF5C>";
      if ((st = expect(s, at, end, final)) != Step::Bad) return st;
      if ((st = expect(s, at, begin, final)) == Step::Wait) return st;
      if ((st = expect(s, at, call_begin, final)) != Step::Done) return st;
      const size_t name_end = s.find(sep, at);
      if (name_end == std::string::npos) return final ? Step::Bad : Step::Wait;
      const std::string name(s.substr(at, name_end - at));
      at = name_end + sep.size();
      if (name.empty()) return Step::Bad;
      if ((st = json_at(s, at, final, value)) != Step::Done) return st;
      if (!value.is_object()) return Step::Bad;
      at = skip_space(s, at);
      if ((st = expect(s, at, call_end, final)) != Step::Done) return st;
      out.push_back(ToolCall{"", name, value.dump()});
      return Step::Done;
    }
    case ToolSyntax::GlmXml: return parse_glm(s, at, final, strings, out);
    case ToolSyntax::Harmony:      // read by HarmonyParser (answer_parser.h), never here
    case ToolSyntax::Unsupported: break;
  }
  return Step::Bad;
}

}  // namespace

size_t json_value_end(std::string_view s) {
  size_t i = skip_space(s, 0);
  if (i == s.size()) return std::string::npos;
  const char first = s[i];
  if (first != '{' && first != '[' && first != '"') {
    // A number or literal ends at a delimiter; at the end of the text it may go on.
    while (i < s.size() && !space(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
    return i == s.size() ? std::string::npos : i;
  }
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

ToolCallParser::ToolCallParser(ToolSyntax syntax, std::vector<std::string> names,
                               std::map<std::string, std::set<std::string>> strings)
    : syntax_(syntax), names_(std::move(names)), strings_(std::move(strings)) {}

bool ToolCallParser::parse_calls(std::vector<ToolCall>& calls, bool final) {
  while (true) {
    size_t at = skip_space(text_, parsed_);
    if (at == text_.size()) return true;
    std::vector<ToolCall> got;
    const Step st = parse_one(syntax_, text_, at, final, strings_, got);
    if (st == Step::Wait) return true;
    if (st == Step::Bad) return false;
    for (const ToolCall& c : got)
      if (!names_.empty() && std::find(names_.begin(), names_.end(), c.name) == names_.end())
        return false;  // not one of the request's functions
    for (ToolCall& c : got) {
      c.id = new_tool_call_id(syntax_);
      calls.push_back(std::move(c));
      ++n_calls_;
    }
    parsed_ = at;
  }
}

std::string ToolCallParser::advance(std::vector<ToolCall>& calls, bool final) {
  const auto& ts = tool_call_triggers(syntax_);
  while (true) {
    if (calls_at_ == std::string::npos) {
      calls_at_ = find_trigger(text_, search_from_, ts, true);
      if (calls_at_ == std::string::npos) break;
      parsed_ = calls_at_;
    }
    if (parse_calls(calls, final) || n_calls_ > 0) break;
    // What follows this trigger is no call: it is content, and the search goes on after it.
    search_from_ = calls_at_ + 1;
    calls_at_ = std::string::npos;
  }
  size_t end = text_.size();
  if (calls_at_ != std::string::npos) end = calls_at_;
  else if (!final) end -= partial_trigger(text_, std::max(shown_, search_from_), ts);
  // Whitespace before a call is not content; hold it until text follows.
  if (!final || calls_at_ != std::string::npos)
    while (end > shown_ && space(text_[end - 1])) --end;
  std::string out = end > shown_ ? text_.substr(shown_, end - shown_) : "";
  shown_ = std::max(shown_, end);
  return out;
}

std::string ToolCallParser::push(std::string_view text, std::vector<ToolCall>& calls) {
  text_ += text;
  return advance(calls, false);
}

std::string ToolCallParser::finish(std::vector<ToolCall>& calls) {
  std::string out = advance(calls, true);
  if (calls_at_ == std::string::npos) return out;
  // Calls were read; text after them that is not one (a call cut short) goes into the content.
  out += text_.substr(skip_space(text_, parsed_));
  parsed_ = shown_ = text_.size();
  return out;
}

}  // namespace jitllm::server
