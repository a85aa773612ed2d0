// From a parsed request to a Job, and from a Job's events to the HTTP response: the whole body
// at once (collect) or Server-Sent Events (start_stream). Both watch the client: a request whose
// client went away is cancelled, so its sequences leave the batch at the next step.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/job.h"
#include "server/openai_format.h"
#include "server/request.h"

namespace httplib {
struct Response;
}

namespace jitllm::server {

class ServedModel;

// Checks the prompt against the model (ids, context) and resolves the options into a Job.
// Throws ApiError naming the parameter. n > the model's -parallel is refused: a job's choices
// decode together.
std::shared_ptr<Job> make_job(const ServedModel& model, std::vector<int32_t> prompt,
                              const GenerationOptions& options, bool chat, bool add_implicit_stops);

// A chat request's Job: its messages through the model's template, its tools' grammar (calls
// held to the argument schemas) and the parsing of calls recorded in `info`.
std::shared_ptr<Job> make_chat_job(ServedModel& model, const ChatRequest& request, ResponseInfo& info);

// The access line's id, tokens and time to first token, once a job is done.
void record_usage(const Job& job, const ResponseInfo& info);

// Waits for the job to finish and returns its response body; throws the job's ApiError. Polls
// the calling HTTP thread's connection meanwhile and cancels the job when the client left.
nlohmann::json collect(Job& job, const ResponseInfo& info, int n, const std::string& prefix);

// Answers with an SSE stream of the job's chunks; `in_flight` counts it until the stream ends.
void start_stream(httplib::Response& res, std::shared_ptr<Job> job, ResponseInfo info,
                  bool include_usage, std::atomic<int>& in_flight);

}  // namespace jitllm::server
