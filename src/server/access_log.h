// jitllmd's access lines: one per request, written once its response is out (a stream's after
// its last event): id, method, route, status, client, prompt and completion tokens, time to first
// token and duration. The HTTP thread serving a request owns its AccessRecord (thread-local);
// handlers add what they know (tokens, the response id).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace jitllm::server {

struct AccessRecord {
  std::string id;  // the response's id when there is one ("cmpl-..."), else "req-..."
  std::chrono::steady_clock::time_point start;
  int64_t prompt_tokens = -1, completion_tokens = -1;  // -1: not a generation
  double ttft_ms = -1;
};

// The label of a path for logs and /metrics: one of the routes that exist, "webui" for the web
// chat's files, else "other" (paths are the client's text).
const char* route_label(const std::string& path);

// Starts the calling thread's record for a new request.
void begin_access();
// The record of the request the calling HTTP thread serves.
AccessRecord& current_access();
// The access line (info level) of the finished request.
void log_access(const httplib::Request& req, const httplib::Response& res);

}  // namespace jitllm::server
