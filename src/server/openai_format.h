// Response bodies in OpenAI's wire format: whole responses and SSE chunks of /v1/completions
// ("text_completion") and /v1/chat/completions ("chat.completion"), logprobs in each endpoint's
// shape, usage. Pure functions of the scheduler's events; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <optional>

#include "server/answer_parser.h"
#include "server/job.h"

namespace jitllm::server {

struct ResponseInfo {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool chat = false;
  bool logprobs = false;
  // How a chat answer's text is read into reasoning, content and tool calls (answer_parser.h);
  // nothing to read for completions.
  AnswerFormat answer;
};

// One choice accumulated over the events of a non-streamed response.
struct ChoiceText {
  std::string text;
  std::string reasoning;  // reasoning_content (AnswerFormat::reasoning)
  std::string finish_reason;
  std::vector<TokenLogprobInfo> tokens;
  std::vector<ToolCall> tool_calls;  // content is null when there are calls and no text
  std::optional<std::string> stop_sequence;  // JobEvent::stop_sequence of the last event
};

nlohmann::json usage_json(const Usage& usage);
// logprobs of one event or a whole choice; `text_offset0` is the legacy completions' offset of
// the first token.
nlohmann::json logprobs_json(bool chat, const std::vector<TokenLogprobInfo>& tokens,
                             size_t text_offset0 = 0);

// A whole response. `prefix` (echo) is put before each completion text.
nlohmann::json full_response(const ResponseInfo& info, const std::vector<ChoiceText>& choices,
                             const Usage& usage, const std::string& prefix = "");
// One SSE chunk for an event; `first` marks a chat choice's first chunk (it carries the role).
nlohmann::json stream_chunk(const ResponseInfo& info, const JobEvent& event, bool first);
// A chunk of a chat choice's reasoning (delta.reasoning_content).
nlohmann::json reasoning_chunk(const ResponseInfo& info, int choice, const std::string& reasoning,
                               bool first);
// A chunk of a chat choice's tool calls, complete ones (delta.tool_calls, numbered from
// `first_index` within the choice).
nlohmann::json tool_calls_chunk(const ResponseInfo& info, int choice, const std::vector<ToolCall>& calls,
                                size_t first_index);
// The chunk with an empty choices array and the usage (stream_options.include_usage).
nlohmann::json usage_chunk(const ResponseInfo& info, const Usage& usage);

// "data: <json>\n\n"
std::string sse(const nlohmann::json& data);

}  // namespace jitllm::server
