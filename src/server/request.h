// OpenAI-compatible request bodies parsed and validated into plain structs. Everything a client
// can get wrong (types, ranges, NaN, unknown roles, too many stop strings) is reported here as an
// ApiError naming the parameter, before anything reaches the scheduler.
#pragma once

#include <nlohmann/json.hpp>

#include "constrain/grammar.h"
#include "core/json_depth.h"  // json_depth_exceeded_at, checked by parse_json_body
#include "server/grammar_trigger.h"
#include "server/reasoning_parser.h"
#include "server/tool_request.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm::server {

// Sampling and stopping options shared by /v1/completions and /v1/chat/completions.
struct GenerationOptions {
  int max_tokens = -1;  // -1: until the context is full or the model stops
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;  // 0: off (llama.cpp extension)
  double min_p = 0.0;
  double typical_p = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double repeat_penalty = 1.0;
  int repeat_last_n = 64;
  std::optional<uint64_t> seed;
  std::map<int32_t, float> logit_bias;  // token id -> bias added to its logit
  std::vector<std::string> stop;        // at most 4 (OpenAI's limit), none empty
  bool ignore_eos = false;
  int n = 1;              // choices per request
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;   // 0..20
  // What the output must match (server/output_constraint.h: grammar, json_schema,
  // response_format), parsed; null = free text.
  std::shared_ptr<const constrain::Grammar> grammar;
  // The grammar is a JSON shape (response_format, json_schema): it holds the answer, not a
  // thinking the prompt opened. A GBNF `grammar` holds the whole output, thinking included.
  bool grammar_is_answer = false;
  std::string answer_gbnf;  // that JSON shape's GBNF (gpt-oss wraps it in its final channel)
  // Empty: the grammar holds from the first token. Otherwise it switches on where the output
  // first shows one of these (a tool call's start, tool_choice auto).
  std::vector<GrammarTrigger> grammar_triggers;
  // Job::triggers_after_thinking and Job::starts_thinking (a thinking template's auto calls).
  bool triggers_after_thinking = false;
  bool starts_thinking = false;
  // The grammar holds tool calls: the tool-call marker tokens may be chosen and are written.
  bool tool_calls = false;
};

struct CompletionRequest {
  std::string model;
  // Either text or pre-tokenized ids (OpenAI accepts both; arrays of several prompts are refused
  // with a clear message since each request carries one prompt here).
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;
  bool echo = false;
  GenerationOptions options;
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool | developer
  std::string content;
  nlohmann::json raw;  // the message as sent (tool calls etc. pass through to the template)
};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools;  // null when absent: the definitions as sent (their key order
                                 // kept), for the template
  ToolRequest tool_request;  // the same validated, with tool_choice and parallel_tool_calls
  // Control-token texts in message contents and tools become control tokens only when the client
  // asks (a raw prompt it built on purpose); otherwise they are text, and only the template's
  // own specials are parsed (chat/content_guard.h). /v1/completions always parses specials, as
  // llama-server does: its prompt is raw.
  bool parse_special_in_content = false;
  GenerationOptions options;
  // reasoning_format (llama-server's): where the thinking goes; unset = the server's
  // --reasoning-format.
  std::optional<ReasoningFormat> reasoning_format;
  // OpenAI's reasoning_effort (none | minimal | low | medium | high), checked against the
  // template when the model is known (chat_job.h).
  std::optional<std::string> reasoning_effort;
  // Anthropic's thinking {"type": "disabled"}: a thinking template's thinking switched off
  // (enable_thinking = false), refused where it cannot be; nothing to do where it does not think.
  bool thinking_disabled = false;
  // chat_template_kwargs (llama-server's): extra template variables, an object.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
};

// Parse a body; throw ApiError (400) naming the offending parameter. `max_body_bytes` is checked
// by the HTTP layer before this is called.
// `ordered`: the same body parsed as ordered_json when needs_ordered_body() (output_constraint.h)
// says key order matters, else null.
CompletionRequest parse_completion_request(const nlohmann::json& body,
                                           const nlohmann::ordered_json* ordered = nullptr);
ChatRequest parse_chat_request(const nlohmann::json& body,
                               const nlohmann::ordered_json* ordered = nullptr);
// Arrays and objects nest at most this deep in a request body (JSON Schemas of real tools stay
// far below it).
constexpr size_t kMaxJsonDepth = 128;
// The JSON text of a body; malformed JSON, or nesting deeper than kMaxJsonDepth -> ApiError 400
// with the position.
nlohmann::json parse_json_body(const std::string& text);
// parse_json_body of a body that must be an object (else ApiError 400).
nlohmann::json parse_json_object_body(const std::string& text);
// A body's optional "model" ("" when absent or null: the default model); not a string -> 400.
std::string model_field(const nlohmann::json& body);

}  // namespace jitllm::server
