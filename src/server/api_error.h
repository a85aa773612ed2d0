// Errors returned to HTTP clients in OpenAI's shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code": ...}}
// Request validation throws ApiError; the HTTP layer turns it into the status and body. The app
// layer's refusals (app::RequestError, transport-free) become ApiErrors here, in one place.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "app/request_error.h"

namespace jitllm::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = "",
           std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)),
        param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json body() const {
    nlohmann::json error = {{"message", what()}, {"type", type_}};
    error["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
    error["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
    return {{"error", error}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

// 503 server_busy: a resource every request shares is full for now (CapacityError: the KV
// cache); the request was fine and may be retried.
inline ApiError server_busy(const std::exception& e) {
  return ApiError(503, "server_error", std::string(e.what()) + "; retry shortly", "", "server_busy");
}

// 400 invalid_request_error naming the parameter.
inline ApiError invalid_request(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", message, param, "invalid_value");
}

// A refused request of the app layer: 400 invalid_request_error with its param and code.
inline ApiError api_error(const app::RequestError& e) {
  return ApiError(400, "invalid_request_error", e.what(), e.param(), e.code());
}

}  // namespace jitllm::server
