// Tool-call syntaxes (see tool_syntax.h).
#include "server/tool_syntax.h"

#include <fmt/format.h>

#include <optional>
#include <random>

#include "constrain/json_schema.h"
#include "server/api_error.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// DeepSeek's markers (fullwidth bars, U+2581 for spaces).
constexpr const char* kDsCallsBegin = "<\uFF5Ctool\u2581calls\u2581begin\uFF5C>";
constexpr const char* kDsCallsEnd = "<\uFF5Ctool\u2581calls\u2581end\uFF5C>";
constexpr const char* kDsCallBegin = "<\uFF5Ctool\u2581call\u2581begin\uFF5C>";
constexpr const char* kDsCallEnd = "<\uFF5Ctool\u2581call\u2581end\uFF5C>";
constexpr const char* kDsSep = "<\uFF5Ctool\u2581sep\uFF5C>";

bool has(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

// The argument key each JSON syntax writes.
const char* arguments_key(ToolSyntax syntax) {
  return syntax == ToolSyntax::Llama3 ? "parameters" : "arguments";
}

// {"name": "<name>", "<key>": <args>} for one tool, as a GBNF sequence.
std::string json_call(const std::string& name, const char* key, const std::string& args_rule) {
  return fmt::format(R"("{{" sp "\"name\"" sp ":" sp {} sp "," sp {} sp ":" sp {} sp "}}")",
                     constrain::gbnf_literal(json(name).dump()),
                     constrain::gbnf_literal(json(key).dump()), args_rule);
}

// GBNF for any text that does not contain `lit` (whose first byte does not recur in it): each
// run of that byte is followed by a byte that breaks the literal off.
std::string text_without(std::string_view lit) {
  const auto cls = [](char c) {
    return c == ']' || c == '\\' || c == '^' || c == '-' ? std::string("\\") + c : std::string(1, c);
  };
  const char first = lit[0];
  std::string breaks;
  for (size_t i = 1; i < lit.size(); ++i) {
    breaks += breaks.empty() ? "" : " | ";
    if (i > 1) breaks += constrain::gbnf_literal(std::string(lit.substr(1, i - 1))) + " ";
    breaks += "[^" + cls(first) + (lit[i] == first ? "" : cls(lit[i])) + "]";
  }
  return "([^" + cls(first) + "] | " + constrain::gbnf_literal(std::string(1, first)) + "+ (" +
         breaks + "))*";
}

bool string_typed(const ojson& schema) {
  return schema.is_object() && schema.contains("type") && schema["type"] == "string";
}

// GLM's arguments of one tool: <arg_key>K</arg_key> <arg_value>V</arg_value> pairs in the
// schema's order (the required ones always), a string's value raw (its length and enum held;
// other string keywords cannot be held on raw text: 400 naming the parameters), any other value
// JSON under its schema.
// An empty schema takes any pairs.
std::string glm_arguments(const ojson& params, const std::string& prefix, const std::string& param,
                          std::string& rules) {
  auto pair = [](const std::string& key, const std::string& value) {
    return "sp \"<arg_key>\" " + key + " \"</arg_key>\" sp \"<arg_value>\" " + value +
           " \"</arg_value>\"";
  };
  if (params.empty() || !params.contains("properties"))
    return "(" + pair("[^<]+", "glm-text") + ")*";
  std::set<std::string> required;
  if (auto r = params.find("required"); r != params.end() && r->is_array())
    for (const ojson& n : *r)
      if (n.is_string()) required.insert(n.get<std::string>());
  std::string seq;
  size_t i = 0;
  for (const auto& [name, prop] : params["properties"].items()) {
    const std::string at = param + ".properties." + name;
    std::string value;
    if (string_typed(prop)) {
      for (const auto& [key, v] : prop.items())
        if (key != "type" && key != "description" && key != "title" && key != "enum" &&
            key != "const" && key != "minLength" && key != "maxLength" && key != "default" &&
            key != "examples")
          throw invalid_request(param, fmt::format("'{}': '{}' cannot be held on GLM's raw "
                                                   "string arguments", at, key));
      if (prop.contains("enum") || prop.contains("const")) {
        const ojson values = prop.contains("const") ? ojson::array({prop["const"]}) : prop["enum"];
        for (const ojson& v : values) {
          if (!v.is_string())
            throw invalid_request(param, fmt::format("'{}': a string's enum holds strings", at));
          value += (value.empty() ? "(" : " | ") + constrain::gbnf_literal(v.get<std::string>());
        }
        value += ")";
      } else if (prop.contains("minLength") || prop.contains("maxLength")) {
        // Counts as the JSON Schema converter takes them: whole numbers up to its repetition cap.
        const ojson& schema = prop;  // (clang 14 captures no structured binding)
        auto count = [&](const char* key) -> std::optional<int64_t> {
          if (!schema.contains(key)) return std::nullopt;
          const ojson& v = schema[key];
          if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
            throw invalid_request(param, fmt::format("'{}': '{}' must be a whole number from 0 to "
                                                     "10000, not {}", at, key, v.dump()));
          return v.get<int64_t>();
        };
        const std::optional<int64_t> lo = count("minLength"), hi = count("maxLength");
        if (lo && hi && *lo > *hi)
          throw invalid_request(param, fmt::format("'{}': minLength {} exceeds maxLength {}", at, *lo, *hi));
        value = fmt::format("[^<]{{{},{}}}", lo.value_or(0), hi ? std::to_string(*hi) : "");
      } else {
        value = "glm-text";
      }
    } else {
      const std::string p = fmt::format("{}p{}-", prefix, i);
      try {
        rules += constrain::json_schema_rules(prop, p);
      } catch (const constrain::SchemaError& e) {
        throw invalid_request(param, fmt::format("'{}': {}", at, e.what()));
      }
      value = p + "root";
    }
    const std::string one = pair(constrain::gbnf_literal(name), value);
    seq += (seq.empty() ? "" : " ") + (required.count(name) ? one : "(" + one + ")?");
    ++i;
  }
  return seq;
}

std::string call_text_hermes(const ojson& call) {
  return "<tool_call>\n" + call.dump() + "\n</tool_call>";
}

}  // namespace

ToolSyntax detect_tool_syntax(std::string_view t) {
  if (has(t, "[TOOL_CALLS]")) return has(t, "[ARGS]") ? ToolSyntax::MistralArgs : ToolSyntax::MistralList;
  // Syntaxes not parsed here, some of which also write <tool_call> or <|python_tag|>: XML
  // arguments (Qwen3-Coder, functionary, GLM), harmony channels (gpt-oss), DeepSeek's markers.
  // DeepSeek V3.1: NAME<｜tool▁sep｜>{args} (R1's templates fence the arguments in ```json).
  if (has(t, kDsSep) && has(t, kDsCallsBegin) && !has(t, "```json")) return ToolSyntax::DeepSeekV31;
  // GLM 4.x, Laguna: <tool_call>NAME <arg_key>..</arg_key> <arg_value>..</arg_value></tool_call>.
  if (has(t, "<tool_call>") && has(t, "<arg_key>") && has(t, "</arg_value>")) return ToolSyntax::GlmXml;
  // gpt-oss: calls go to the recipient "functions.NAME" on the commentary channel.
  if (has(t, "<|channel|>commentary") && has(t, "\"functions.\"")) return ToolSyntax::Harmony;
  for (std::string_view other : {"<function=", "<arg_key>", "<|channel|>", "tool\u2581calls", ">>>"})
    if (has(t, other)) return ToolSyntax::Unsupported;
  if (has(t, "<tool_call>")) return has(t, "\"arguments\"") ? ToolSyntax::Hermes : ToolSyntax::Unsupported;
  if (has(t, "<|python_tag|>") || (has(t, "\"parameters\"") && has(t, "ipython")))
    return ToolSyntax::Llama3;
  if (has(t, "tools") || has(t, "tool_calls")) return ToolSyntax::Unsupported;
  return ToolSyntax::Generic;
}

const char* tool_syntax_name(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::Hermes: return "hermes";
    case ToolSyntax::Llama3: return "llama3";
    case ToolSyntax::MistralList: return "mistral-list";
    case ToolSyntax::MistralArgs: return "mistral-args";
    case ToolSyntax::Harmony: return "harmony";
    case ToolSyntax::DeepSeekV31: return "deepseek-v3.1";
    case ToolSyntax::GlmXml: return "glm-xml";
    case ToolSyntax::Generic: return "generic";
    case ToolSyntax::Unsupported: return "unsupported";
  }
  return "unsupported";
}

const std::vector<GrammarTrigger>& tool_call_triggers(ToolSyntax syntax) {
  static const std::vector<GrammarTrigger> hermes = {{"<tool_call>", false}};
  // Llama 3 writes a bare call as the whole answer: {"name" elsewhere is just JSON.
  static const std::vector<GrammarTrigger> llama = {{"<|python_tag|>", false}, {"{\"name\"", true}};
  static const std::vector<GrammarTrigger> mistral = {{"[TOOL_CALLS]", false}};
  // The recipient, in the channel header or (recipient first) right after the role.
  static const std::vector<GrammarTrigger> harmony = {{" to=functions.", false}};
  static const std::vector<GrammarTrigger> deepseek = {{kDsCallsBegin, false}};
  static const std::vector<GrammarTrigger> none;
  switch (syntax) {
    case ToolSyntax::Hermes:
    case ToolSyntax::GlmXml:
    case ToolSyntax::Generic: return hermes;
    case ToolSyntax::Llama3: return llama;
    case ToolSyntax::MistralList:
    case ToolSyntax::MistralArgs: return mistral;
    case ToolSyntax::Harmony: return harmony;
    case ToolSyntax::DeepSeekV31: return deepseek;
    case ToolSyntax::Unsupported: break;
  }
  return none;
}

ToolGrammar tool_call_grammar(ToolSyntax syntax, const ToolRequest& request, ThinkingLead lead) {
  if (syntax == ToolSyntax::Unsupported)
    throw invalid_request("tools", "this model's chat template writes tool calls in a syntax "
                                   "this server does not parse");
  // Between the parts of a call: a little whitespace (a small model left to the argument
  // grammar's bounded whitespace spends its tokens there).
  std::string rules = constrain::json_value_rules() + "sp ::= [ \\t\\n]{0,4}\n";
  std::vector<std::string> calls;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const ToolDefinition& tool = request.tools[i];
    if (request.choice == ToolChoice::Named && tool.name != request.named) continue;
    const std::string prefix = fmt::format("tool{}-", i);
    const std::string param = fmt::format("tools[{}].function.parameters", i);
    // Arguments are an object: an empty schema means any object, another type is refused.
    std::string args = prefix + "root";
    if (syntax == ToolSyntax::GlmXml) {
      if (auto t = tool.parameters.find("type"); t != tool.parameters.end() && *t != "object")
        throw invalid_request(param, fmt::format("'{}' must describe an object (the arguments), "
                                                 "not {}", param, t->dump()));
      args = glm_arguments(tool.parameters, prefix, param, rules);
    } else if (tool.parameters.empty()) {
      args = "json-object";
    } else {
      if (auto t = tool.parameters.find("type"); t != tool.parameters.end() && *t != "object")
        throw invalid_request(param, fmt::format("'{}' must describe an object (the arguments), "
                                                 "not {}", param, t->dump()));
      try {
        rules += constrain::json_schema_rules(tool.parameters, prefix);
      } catch (const constrain::SchemaError& e) {
        throw invalid_request(param, fmt::format("'{}': {}", param, e.what()));
      }
    }
    if (syntax == ToolSyntax::MistralArgs)
      calls.push_back(constrain::gbnf_literal(tool.name) + " \"[ARGS]\" " + args);
    else if (syntax == ToolSyntax::Harmony)
      calls.push_back(constrain::gbnf_literal(tool.name) + " harmony-header " + args);
    else if (syntax == ToolSyntax::GlmXml)
      calls.push_back(constrain::gbnf_literal(tool.name) + " " + args + " sp");
    else if (syntax == ToolSyntax::DeepSeekV31)
      calls.push_back(constrain::gbnf_literal(tool.name) + " " + constrain::gbnf_literal(kDsSep) +
                      " " + args);
    else
      calls.push_back(json_call(tool.name, arguments_key(syntax), args));
  }
  std::string call = "tool-call ::= ";
  for (size_t i = 0; i < calls.size(); ++i) call += (i ? " | " : "") + calls[i];
  rules += call + "\n";

  // A named function is one call; otherwise parallel_tool_calls says whether more may follow.
  const bool several = request.parallel && request.choice != ToolChoice::Named;
  ToolGrammar g;
  switch (syntax) {
    case ToolSyntax::Hermes:
    case ToolSyntax::Generic:
      rules += R"(one-call ::= "<tool_call>" sp tool-call sp "</tool_call>")" "\n";
      // Whitespace may follow the last of several calls (the end token comes after it).
      rules += several ? "root ::= one-call (sp one-call)* sp\n" : "root ::= one-call\n";
      break;
    case ToolSyntax::Llama3:
      // The template allows one call per turn.
      rules += R"(root ::= ("<|python_tag|>")? tool-call)" "\n";
      break;
    case ToolSyntax::MistralList:
      rules += several ? R"(root ::= "[TOOL_CALLS]" "[" tool-call ("," sp tool-call)* "]")" "\n"
                       : R"(root ::= "[TOOL_CALLS]" "[" tool-call "]")" "\n";
      break;
    case ToolSyntax::MistralArgs:
      rules += R"(one-call ::= "[TOOL_CALLS]" tool-call)" "\n";
      rules += several ? "root ::= one-call+\n" : "root ::= one-call\n";
      break;
    case ToolSyntax::Harmony:
      // From the trigger (auto) or after an optional analysis message (required, named); the
      // <|call|> that ends the turn comes after the grammar, which allows one call.
      rules += R"(harmony-header ::= ("<|channel|>" ("commentary" | "analysis"))? (" " "<|constrain|>"? "json")? "<|message|>")" "\n";
      rules += R"(one-call ::= " to=functions." tool-call)" "\n";
      rules += "harmony-thought ::= " + text_without("<|end|>") + "\n";
      rules += request.choice == ToolChoice::Auto
                   ? "root ::= one-call\n"
                   : R"(root ::= ("<|channel|>analysis<|message|>" harmony-thought "<|end|><|start|>assistant")? ("<|channel|>commentary")? one-call)" "\n";
      break;
    case ToolSyntax::GlmXml:
      rules += "glm-text ::= " + text_without("</arg_value>") + "\n";
      rules += R"(one-call ::= "<tool_call>" tool-call "</tool_call>")" "\n";
      rules += several ? "root ::= one-call (sp one-call)* sp\n" : "root ::= one-call\n";
      break;
    case ToolSyntax::DeepSeekV31:
      rules += fmt::format("one-call ::= {} tool-call {}\n", constrain::gbnf_literal(kDsCallBegin),
                           constrain::gbnf_literal(kDsCallEnd));
      rules += fmt::format("root ::= {} {} {}\n", constrain::gbnf_literal(kDsCallsBegin),
                           several ? "one-call+" : "one-call", constrain::gbnf_literal(kDsCallsEnd));
      break;
    case ToolSyntax::Unsupported: break;
  }
  // The thinking a required call may follow (the trigger of auto comes after it anyway).
  if (request.choice != ToolChoice::Auto && lead != ThinkingLead::None && syntax != ToolSyntax::Harmony) {
    const size_t at = rules.rfind("root ::= ");
    const std::string root = rules.substr(at + 9);
    rules.erase(at);
    rules += "think-text ::= " + text_without("</think>") + "\n";
    rules += lead == ThinkingLead::Open
                 ? R"(root ::= think-text "</think>" sp call-root)" "\n"
                 : R"(root ::= ("<think>" think-text "</think>" sp)? call-root)" "\n";
    rules += "call-root ::= " + root;
  }
  if (request.choice == ToolChoice::Auto) g.triggers = tool_call_triggers(syntax);
  g.gbnf = std::move(rules);
  return g;
}

std::map<std::string, std::set<std::string>> string_arguments(const ToolRequest& request) {
  std::map<std::string, std::set<std::string>> out;
  for (const ToolDefinition& t : request.tools)
    if (auto p = t.parameters.find("properties"); p != t.parameters.end() && p->is_object())
      for (const auto& [name, prop] : p->items())
        if (string_typed(prop)) out[t.name].insert(name);
  return out;
}

std::string harmony_answer_gbnf(const std::string& json_gbnf) {
  return json_gbnf + "\nharmony-answer-thought ::= " + text_without("<|end|>") +
         "\nharmony-answer ::= (\"<|channel|>analysis<|message|>\" harmony-answer-thought "
         "\"<|end|><|start|>assistant\")? \"<|channel|>final\" (\" \" \"<|constrain|>\"? "
         "\"json\")? \"<|message|>\" root\n";
}

std::string new_tool_call_id(ToolSyntax syntax) {
  static constexpr char kAlnum[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const bool mistral = syntax == ToolSyntax::MistralList || syntax == ToolSyntax::MistralArgs;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

void adapt_conversation(ToolSyntax syntax, const ToolRequest& request, ojson& messages,
                        ojson& tools) {
  for (size_t i = 0; i < messages.size(); ++i) {
    ojson& m = messages[i];
    // gpt-oss's template reads an assistant turn's analysis from `thinking` (and refuses it
    // beside content when the turn calls a tool), as llama-server passes it.
    if (syntax == ToolSyntax::Harmony && m.value("role", "") == "assistant" &&
        m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
      m["thinking"] = m["reasoning_content"];
      if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty())
        m.erase("content");
    }
    auto calls = m.find("tool_calls");
    if (calls == m.end() || calls->is_null()) continue;
    const std::string at = fmt::format("messages[{}].tool_calls", i);
    if (!calls->is_array()) throw invalid_request(at, fmt::format("'{}' must be an array", at));
    for (size_t j = 0; j < calls->size(); ++j) {
      ojson& call = (*calls)[j];
      const bool ok = call.is_object() && call.contains("function") && call["function"].is_object() &&
                      call["function"].contains("name") && call["function"]["name"].is_string();
      if (!ok)
        throw invalid_request(fmt::format("{}[{}]", at, j),
                              fmt::format("'{}[{}]' must be an object with a function and its "
                                          "name", at, j));
      ojson& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      ojson args = ojson::parse(fn["arguments"].get<std::string>(), nullptr, false);
      if (args.is_object()) fn["arguments"] = std::move(args);
    }
  }
  // gpt-oss's template writes "// " + description for each tool, which fails on a tool without
  // one (as in Jinja2): an empty one is what such a tool says.
  if (syntax == ToolSyntax::Harmony && tools.is_array())
    for (ojson& t : tools)
      if (t.is_object() && t.contains("function") && t["function"].is_object() &&
          !t["function"].contains("description"))
        t["function"]["description"] = "";
  if (syntax == ToolSyntax::DeepSeekV31 && request.calls_expected()) {
    // DeepSeek V3.1's documented tool prompt, at the end of the system message.
    std::string text = "## Tools\nYou have access to the following tools:\n";
    for (const ToolDefinition& t : request.tools)
      text += "\n### " + t.name + "\nDescription: " + t.description + "\n\nParameters: " +
              (t.parameters.empty() ? ojson::object() : t.parameters).dump() + "\n";
    text += std::string("\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n") +
            kDsCallsBegin + kDsCallBegin + "tool_call_name" + kDsSep + "tool_call_arguments" +
            kDsCallEnd + "{{additional_tool_calls}}" + kDsCallsEnd +
            "\n\nWhere:\n- `tool_call_name` must be an exact match to one of the available "
            "tools\n- `tool_call_arguments` must be valid JSON that strictly follows the tool's "
            "Parameters Schema\n- For multiple tool calls, chain them directly without "
            "separators or spaces\n";
    if (!messages.empty() && messages[0].value("role", "") == "system" && messages[0]["content"].is_string())
      messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + text;
    else
      messages.insert(messages.begin(), ojson{{"role", "system"}, {"content", text}});
    return;
  }
  if (syntax != ToolSyntax::Generic) return;

  // The template knows no tools: describe them, and write calls and results as text.
  ojson out = ojson::array();
  for (ojson& m : messages) {
    const std::string role = m.value("role", "");
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      std::string text = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
      for (const ojson& call : m["tool_calls"]) {
        const ojson fn = call.value("function", ojson::object());
        text += (text.empty() ? "" : "\n") +
                call_text_hermes({{"name", fn.value("name", "")},
                                  {"arguments", fn.value("arguments", ojson::object())}});
      }
      out.push_back({{"role", "assistant"}, {"content", text}});
    } else if (role == "tool") {
      const std::string result = "<tool_response>\n" +
                                 (m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "") +
                                 "\n</tool_response>";
      // Results of one turn's calls go back as one user message (templates that insist on
      // alternating roles accept it).
      if (!out.empty() && out.back().value("role", "") == "user" && out.back().value("tool_results", false))
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + result;
      else
        out.push_back({{"role", "user"}, {"content", result}, {"tool_results", true}});
    } else {
      out.push_back(std::move(m));
    }
  }
  for (ojson& m : out) m.erase("tool_results");
  if (request.calls_expected()) {
    std::string text =
        "You may call the functions below. To call one, answer with "
        "<tool_call>{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}"
        "</tool_call>" +
        std::string(request.parallel ? " (one such block per call)" : "") +
        "; the results come back in <tool_response> blocks.\n\nFunctions:";
    for (const ToolDefinition& t : request.tools)
      text += "\n" + ojson({{"name", t.name}, {"description", t.description},
                            {"parameters", t.parameters}}).dump();
    if (!out.empty() && out[0].value("role", "") == "system" && out[0]["content"].is_string())
      out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + text;
    else
      out.insert(out.begin(), ojson{{"role", "system"}, {"content", text}});
  }
  messages = std::move(out);
  tools = nullptr;
}

}  // namespace jitllm::server
