// POST /v1/responses (OpenAI's Responses API) read into a chat request, so that one path serves
// both routes (template, tools, output constraints, scheduler): `input` items become chat
// messages, `instructions` the first system message, flat function tools the chat shape,
// `text.format` a response_format. Nothing is stored here, so whatever needs a stored response
// or conversation (previous_response_id, store: true, background, item_reference) is a 400, as
// is every other field the server does not honour (built-in tools, images, reasoning, ...) and
// every field it does not know. truncation "auto" drops the oldest turns (truncation_starts). Refusals found by the chat parser
// are renamed to the Responses field the client sent ("input[2].content", "max_output_tokens").
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/request.h"

namespace jitllm::server {

struct ResponsesRequest {
  ChatRequest chat;  // what the chat path runs
  bool stream = false;
  // The request's settings as a response echoes them (instructions, max_output_tokens,
  // temperature, top_p, tools, tool_choice, parallel_tool_calls, text, metadata, ...), defaults
  // filled in, in the order a response object lists them.
  nlohmann::ordered_json echo;
  // Where chat message i came from ("instructions", "input", "input[3]"): error params.
  std::vector<std::string> message_origin;
  // truncation "auto": a conversation too long for the context loses its oldest turns.
  bool truncate = false;
};

// Where a conversation may start instead when it is truncated, oldest first: each user message
// after the first message that is not a system message (instructions and the system messages
// before it always stay; a turn goes with its calls and their results).
std::vector<size_t> truncation_starts(const std::vector<ChatMessage>& messages);
// The request without the messages between the leading system messages and `start`.
ResponsesRequest truncated(const ResponsesRequest& request, size_t start);

// Throws ApiError 400 naming the Responses field. The body is ordered_json: the schemas of tools
// and text.format keep the order their properties were written in.
ResponsesRequest parse_responses_request(const nlohmann::ordered_json& body);

// A refusal of the chat path (param "messages[2].content", "max_tokens", "response_format...",
// "tools[0].function.parameters") under the Responses name; other errors as they are.
ApiError responses_error(const ApiError& e, const std::vector<std::string>& message_origin);

}  // namespace jitllm::server
