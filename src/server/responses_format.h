// The Responses API's output: the response object ("object": "response") and its stream of
// named SSE events, built from the chat path's output (content text and parsed tool calls) by
// one writer, so a streamed response ends as the same object a whole one is. Pure: no I/O.
//
// Events, each with a sequence_number from 0:
//   response.created, response.in_progress
//   per reasoning item: response.output_item.added, response.content_part.added,
//                      response.reasoning_text.delta..., response.reasoning_text.done,
//                      response.content_part.done, response.output_item.done
//   per message item:  response.output_item.added, response.content_part.added,
//                      response.output_text.delta..., response.output_text.done,
//                      response.content_part.done, response.output_item.done
//   per function call: response.output_item.added, response.function_call_arguments.delta,
//                      response.function_call_arguments.done, response.output_item.done
//   then response.completed | response.incomplete (max_output_tokens), or error and
//   response.failed when the generation failed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/job.h"
#include "server/tool_call_parser.h"

namespace jitllm::server {

// "resp_", "msg_", "fc_" + 24 hex digits.
std::string new_responses_id(const char* prefix);

// usage in the Responses shape (input_tokens, output_tokens, their details).
nlohmann::ordered_json responses_usage(const Usage& usage, int64_t reasoning_tokens = 0);

class ResponseWriter {
 public:
  // `echo`: the request's settings (ResponsesRequest::echo).
  ResponseWriter(std::string id, int64_t created_at, std::string model, nlohmann::ordered_json echo);

  // The events that open a stream.
  std::string begin();
  // Content text: opens a message item when none is open. A UTF-8 character cut between two
  // calls waits for its end, so every delta is whole characters. `logprobs`: its tokens' log
  // probabilities ({token, logprob, bytes, top_logprobs}), sent with the next delta.
  std::string text(std::string_view delta,
                   const nlohmann::ordered_json& logprobs = nlohmann::ordered_json::array());
  // Reasoning text (a thinking model's, reasoning_parser.h): opens a reasoning item (one
  // reasoning_text part) when none is open, closing an open message; whole characters only.
  std::string reasoning(std::string_view delta);
  // The reasoning written so far (its tokens are counted for usage by the caller).
  const std::string& reasoning_text() const { return all_reasoning_; }
  // Complete tool calls, each a function_call item (an open message is closed first).
  std::string calls(const std::vector<ToolCall>& calls);
  // The output ended ("stop", "tool_calls" or "length"): closes what is open, then
  // response.completed, or response.incomplete for "length". `reasoning_tokens`: how many of
  // the output tokens were reasoning (usage.output_tokens_details).
  std::string finish(const std::string& finish_reason, const Usage& usage,
                     int64_t reasoning_tokens = 0);
  // The generation failed: an error event, then response.failed.
  std::string fail(const ApiError& error);

  // The response object as it stands (after finish(): the whole response).
  nlohmann::ordered_json response() const;

 private:
  std::string event(const char* type, nlohmann::ordered_json fields);
  std::string open_message();  // a message item and its text part, unless one is open
  std::string close_message(const char* status);
  std::string close_reasoning(const char* status);

  std::string id_, model_;
  int64_t created_at_ = 0;
  nlohmann::ordered_json echo_;
  std::string status_ = "in_progress";
  nlohmann::ordered_json incomplete_details_, error_, usage_;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();
  int64_t sequence_ = 0;
  // The message item being written (an index into output_), -1 when none is open.
  int open_message_ = -1;
  std::string message_text_;  // its text so far
  nlohmann::ordered_json message_logprobs_ = nlohmann::ordered_json::array();  // sent so far
  nlohmann::ordered_json pending_logprobs_ = nlohmann::ordered_json::array();  // not yet sent
  std::string utf8_tail_;     // the start of a character whose last bytes have not come yet
  // The reasoning item being written (an index into output_), -1 when none is open.
  int open_reasoning_ = -1;
  std::string reasoning_text_;    // its text so far
  std::string reasoning_tail_;    // as utf8_tail_, for the reasoning
  std::string all_reasoning_;     // every reasoning item's text
};

// "event: TYPE\ndata: JSON\n\n"
std::string sse_event(const std::string& type, const nlohmann::ordered_json& data);

}  // namespace jitllm::server
