// RequestError: what the app layer throws when a request (the JSON a front end got, or built from
// its flags) is wrong: the message, the field it names and a short code. It is a jitllm::Error,
// so `jitllm` prints it as one line; the server answers it as a 400 invalid_request_error with
// the same param and code (server/api_error.h). No HTTP here: statuses belong to the server.
#pragma once

#include <string>

#include "core/error.h"

namespace jitllm::app {

class RequestError : public Error {
 public:
  // param "" = the request as a whole; code "" = none.
  RequestError(std::string param, const std::string& message, std::string code = "invalid_value")
      : Error(message), param_(std::move(param)), code_(std::move(code)) {}

  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  std::string param_, code_;
};

}  // namespace jitllm::app
