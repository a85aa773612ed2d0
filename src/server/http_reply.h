// JSON replies of the HTTP routes: a body with its status, and an ApiError in OpenAI's shape.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace jitllm::server {

inline void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

inline void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), e.body());
}

}  // namespace jitllm::server
