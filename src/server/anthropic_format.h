// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) on the chat path: a
// request is validated and translated into a ChatRequest (OpenAI-shaped messages, tools and a
// ToolRequest, GenerationOptions) plus the text of a final assistant turn to continue; what the
// job produced comes back as a "message" body or as the named SSE events of a stream. Errors
// have Anthropic's shape: {"type": "error", "error": {"type", "message"}}. Bodies keep
// Anthropic's key order (ordered_json). Pure functions and one event translator; no I/O, no
// engine.
//
// Honoured: model, max_tokens, system (string or text blocks), messages (user / assistant;
// text, tool_use and tool_result blocks; consecutive turns of one role merged), stop_sequences,
// temperature, top_p, top_k, stream, tools (custom: name, description, input_schema),
// tool_choice (auto, any, tool, none; disable_parallel_tool_use), metadata.user_id (kept for
// no one), cache_control (prefixes are always cached), thinking {"type": "disabled"}, assistant
// thinking blocks (as the turn's reasoning_content; a thinking model's reasoning comes back as
// one, as llama-server writes it),
// service_tier auto / standard_only (there is one tier). Everything else is a 400 naming it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/openai_format.h"
#include "server/request.h"

namespace jitllm::server {

struct AnthropicRequest {
  // model, messages and tools in the chat path's (OpenAI) shape, options with max_tokens,
  // sampling, stop = stop_sequences and stream.
  ChatRequest chat;
  // A final assistant turn's text: the answer starts with it and the model continues; the
  // response holds only the continuation.
  std::string continuation;
};

// Throws ApiError 400 naming the field ("messages[1].content[0].type"). `count_tokens`: the
// body of /v1/messages/count_tokens (max_tokens not required). `ordered`: the body as
// ordered_json when it has tools (their schemas keep the order properties were written in).
AnthropicRequest parse_anthropic_request(const nlohmann::json& body,
                                         const nlohmann::ordered_json* ordered, bool count_tokens);

// The routes whose errors are written in Anthropic's shape.
bool is_anthropic_path(std::string_view path);
// Anthropic's error type for an HTTP status (400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 413 request_too_large, 503 overloaded_error, other
// 5xx api_error, ...).
const char* anthropic_error_type(int status);
nlohmann::ordered_json anthropic_error_body(const ApiError& error);

// What a message's stop_reason is told from besides the choice.
struct AnthropicEnding {
  std::vector<std::string> stops;  // the request's stop_sequences
  // max_tokens was more than the context had room for: running out is the context's end.
  bool context_bound = false;
};

// Anthropic's stop_reason for a finished choice: max_tokens when it ran out (or
// model_context_window_exceeded when the context was the limit), tool_use when it made calls,
// stop_sequence when one of the request's stop_sequences ended it (an implicit stop of the
// template is the end of the turn), else end_turn.
const char* anthropic_stop_reason(const ChoiceText& choice, const AnthropicEnding& ending);

// A tool_use block's id from the tool-call parser's ("call_" + 24, or 9 for Mistral's).
std::string anthropic_tool_use_id(const std::string& call_id);

// The whole response: {"id", "type": "message", "role": "assistant", "model", "content": [a
// thinking block, text and tool_use blocks], "stop_reason", "stop_sequence", "usage": {"input_tokens",
// "output_tokens"}}.
nlohmann::ordered_json anthropic_message(const ResponseInfo& info, const ChoiceText& choice,
                                         const Usage& usage, const AnthropicEnding& ending);

// "event: NAME\ndata: JSON\n\n"
std::string anthropic_sse(const char* event, const nlohmann::ordered_json& data);

// The events of one streamed message, from the job's events of choice 0:
//   message_start, ping, (content_block_start, content_block_delta*, content_block_stop)*,
//   message_delta {stop_reason, stop_sequence, usage.output_tokens}, message_stop
// Text goes out as text_delta as it comes (held back only where it may start a tool call);
// a thinking model's reasoning before it as a thinking block (thinking_delta, then an empty
// signature_delta); each tool call, once complete, is a tool_use block with one
// input_json_delta.
class AnthropicStream {
 public:
  AnthropicStream(ResponseInfo info, AnthropicEnding ending, int64_t input_tokens);

  // message_start and a ping: sent before the first token.
  std::string start();
  // The events for some of the job's output.
  std::string push(const JobEvent& event);
  // The closing events once the job finished (its usage), or an error event.
  std::string finish(const Usage& usage);
  std::string fail(const ApiError& error);

 private:
  std::string thinking(const std::string& piece);
  std::string text(const std::string& piece);
  std::string close_thinking();
  std::string close_block();  // the open thinking or text block
  std::string tool_use(const ToolCall& call);

  ResponseInfo info_;
  AnthropicEnding ending_;
  int64_t input_tokens_;
  std::optional<AnswerParser> parser_;  // when the text is parsed (info.answer)
  ChoiceText so_far_;                     // finish_reason, stop_sequence, calls made
  int next_index_ = 0;                    // the next content block's index
  bool text_open_ = false;                // a text block is open (index next_index_ - 1)
  bool thinking_open_ = false;            // a thinking block is open (the same)
};

}  // namespace jitllm::server
