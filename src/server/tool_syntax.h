// How a model writes tool calls, read off its chat template, and what follows from it: the
// grammar that holds a call to the tools' argument schemas, the text that starts a call (where
// a lazily applied grammar switches on), the conversation as the template can render it, and
// the call ids the template accepts back.
//
//   Hermes      <tool_call>{"name": N, "arguments": {...}}</tool_call>, repeated
//               (Qwen2.5, Qwen3, Hermes 2 Pro / 3, Granite 4, ...)
//   Llama3      [<|python_tag|>]{"name": N, "parameters": {...}}, one call per turn
//               (Llama 3.1 / 3.2 / 3.3)
//   MistralList [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] (Mistral Nemo)
//   MistralArgs [TOOL_CALLS]N[ARGS]{...}, repeated (Mistral Small 3.2, Devstral, Ministral 3)
//   Harmony     gpt-oss: <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...},
//               one call per turn, ended by <|call|> (harmony_parser.h reads the whole output)
//   DeepSeekV31 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
//               <｜tool▁calls▁end｜> (DeepSeek V3.1; its template does not describe the tools, so
//               they go into the system message in DeepSeek's documented format)
//   GlmXml      <tool_call>N\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>...</tool_call>, strings
//               written raw, other values as JSON (GLM 4.5 / 4.6 / 4.7, Laguna)
//   Generic     a template that knows no tools: the tools are described in a system message
//               and calls written the Hermes way; calls and results in the history become text
//   Unsupported a template with a tool syntax not parsed here (DeepSeek R1's fenced JSON,
//               Qwen3-Coder XML, functionary, ...): requests with tools get a 400
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "server/grammar_trigger.h"
#include "server/tool_request.h"

namespace jitllm::server {

enum class ToolSyntax {
  Hermes, Llama3, MistralList, MistralArgs, Harmony, DeepSeekV31, GlmXml, Generic, Unsupported
};

ToolSyntax detect_tool_syntax(std::string_view template_source);
const char* tool_syntax_name(ToolSyntax syntax);

struct ToolGrammar {
  std::string gbnf;  // root: the call(s) the request allows
  // Empty: the grammar holds from the first token (required, named). Otherwise (auto) the
  // output is free until one of these texts appears; the grammar then holds from that text on.
  std::vector<GrammarTrigger> triggers;
};

// What may come before the calls of required / named tool_choice, whose grammar holds from the
// first token: nothing, a <think>...</think> block, or the rest of a thinking the prompt opened
// (its text, then </think>). Harmony's analysis message is always allowed.
enum class ThinkingLead { None, Optional, Open };

// Throws ApiError 400 naming tools[i].function.parameters when a schema cannot be enforced.
ToolGrammar tool_call_grammar(ToolSyntax syntax, const ToolRequest& request,
                              ThinkingLead lead = ThinkingLead::None);
// gpt-oss's answer held to a JSON shape (`json_gbnf`, rooted at `root`): an optional analysis
// message, then the final channel (with its json constraint, as llama-server allows) and the
// JSON. The rule to start from is harmony-answer.
std::string harmony_answer_gbnf(const std::string& json_gbnf);

// The texts that start a call in `syntax` (what auto's grammar and the parser look for).
const std::vector<GrammarTrigger>& tool_call_triggers(ToolSyntax syntax);

// The arguments of each tool whose schema says string (GlmXml writes them raw, so "12" stays
// "12"; other values are read as JSON).
std::map<std::string, std::set<std::string>> string_arguments(const ToolRequest& request);

// Call ids as the syntax's template accepts them back ("call_" + 24 characters; Mistral's
// templates insist on 9 alphanumerics).
std::string new_tool_call_id(ToolSyntax syntax);

// The messages and tools as the template should see them: tool-call arguments sent as JSON
// strings (OpenAI's shape) become objects (templates write them with tojson); for DeepSeekV31
// the tools are described in the first system message (its template does not); for Generic, the
// tools go into the first system message with the calling convention, assistant calls become
// <tool_call> text and tool results user messages. `tools` is replaced by what the template
// gets (null for Generic).
void adapt_conversation(ToolSyntax syntax, const ToolRequest& request,
                        nlohmann::ordered_json& messages, nlohmann::ordered_json& tools);

}  // namespace jitllm::server
