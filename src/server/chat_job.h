// From a validated chat request to a Job on a model: the tool-call grammar (required and named
// calls held from the first token, auto from where a call starts), the conversation adapted to
// what the template renders, the prompt tokenized. Shared by /v1/chat/completions and
// /v1/messages (which translates Anthropic's shapes into a ChatRequest first); the wire formats
// stay with the routes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/job.h"
#include "server/openai_format.h"
#include "server/request.h"

namespace jitllm::server {

class ServedModel;

// The prompt of a chat request as the model sees it (tools in the template or, for templates
// that know none, in a system message). `continuation`: the start of the answer, which the
// model continues (Anthropic's final assistant turn); text, never control tokens.
std::vector<int32_t> chat_prompt(const ServedModel& model, const ChatRequest& request,
                                 const std::string& continuation = "");

// The Job of a chat request, not yet submitted. Fills info.tool_syntax and info.tool_names when
// calls may come (the response's parser reads them). Throws ApiError naming the parameter.
std::shared_ptr<Job> make_chat_job(const ServedModel& model, const ChatRequest& request,
                                   ResponseInfo& info, const std::string& continuation = "");

}  // namespace jitllm::server
