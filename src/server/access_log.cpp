// Access lines (see access_log.h).
#include "server/access_log.h"

#include <httplib.h>

#include "core/log_event.h"
#include "server/webui_assets.h"

namespace jitllm::server {

namespace {

thread_local AccessRecord t_record;

const char* const kRoutes[] = {"/v1/completions", "/v1/chat/completions", "/v1/systemone",
                               "/v1/models",      "/tokenize",            "/detokenize",
                               "/props",          "/slots",               "/health",
                               "/metrics",        "/v1/messages",
                               "/v1/messages/count_tokens", "/v1/responses"};

}  // namespace

const char* route_label(const std::string& path) {
  if (find_webui_asset(path)) return "webui";  // the page and its files, one label
  for (const char* r : kRoutes)
    if (path == r) return r;
  if (path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

void begin_access() {
  t_record = AccessRecord{};
  t_record.start = std::chrono::steady_clock::now();
}

AccessRecord& current_access() { return t_record; }

void log_access(const httplib::Request& req, const httplib::Response& res) {
  if (LogLevel::Info < log_threshold()) return;
  const AccessRecord& r = t_record;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.start).count();
  nlohmann::ordered_json f = {{"id", r.id.empty() ? "-" : r.id},
                              {"method", req.method},
                              {"route", route_label(req.path)},
                              {"status", res.status},
                              {"client", req.remote_addr}};
  if (r.prompt_tokens >= 0) {
    f["prompt_tokens"] = r.prompt_tokens;
    f["completion_tokens"] = r.completion_tokens;
  }
  if (r.ttft_ms >= 0) f["ttft_ms"] = std::round(r.ttft_ms * 10) / 10;
  f["duration_ms"] = std::round(ms * 10) / 10;
  log_event(LogLevel::Info, "request", f);
}

}  // namespace jitllm::server
