// The Anthropic routes' HTTP side without a model: the key taken from x-api-key as well as from
// Authorization, and every error on /v1/messages* in Anthropic's shape (401 before routing, 400
// from validation, 503 while no model is loaded, 404 of a route that does not exist), while the
// OpenAI routes keep OpenAI's. Driven through a socketpair (GuardedHttpServer::serve_socket).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/log.h"
#include "server/socket_talk.h"
#include "server/http_server.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;

struct Reply {
  int status = 0;
  json body;
};

// One request on its own connection; the status and the JSON body of the answer.
Reply request(HttpServer& server, const std::string& method, const std::string& path,
              const std::string& headers, const std::string& body) {
  const std::string bytes =
      method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  const std::string out = talk_on_socketpair(server, bytes);
  Reply r;
  if (out.rfind("HTTP/1.1 ", 0) != 0) {
    ADD_FAILURE() << "no HTTP answer: " << out;
    return r;
  }
  r.status = std::stoi(out.substr(9, 3));
  const size_t at = out.find("\r\n\r\n");
  r.body = json::parse(out.substr(at + 4), nullptr, false);
  return r;
}

ServerOptions keyed() {
  ServerOptions o;
  o.api_key = "right-key";
  return o;
}

const std::string kValid =
    R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]})";

void expect_anthropic_error(const Reply& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body.dump();
  EXPECT_EQ(r.body["type"], "error") << r.body.dump();
  EXPECT_EQ(r.body["error"]["type"], type) << r.body.dump();
  EXPECT_TRUE(r.body["error"]["message"].is_string()) << r.body.dump();
}

TEST(AnthropicRoutes, KeyFromXApiKeyOrBearer) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(keyed(), {});
  expect_anthropic_error(request(server, "POST", "/v1/messages", "", kValid), 401,
                         "authentication_error");
  expect_anthropic_error(request(server, "POST", "/v1/messages", "x-api-key: wrong\r\n", kValid),
                         401, "authentication_error");
  // Past the key check, the model is still loading: 503 overloaded_error.
  expect_anthropic_error(
      request(server, "POST", "/v1/messages", "x-api-key: right-key\r\n", kValid), 503,
      "overloaded_error");
  expect_anthropic_error(
      request(server, "POST", "/v1/messages",
              "Authorization: Bearer right-key\r\nanthropic-version: 2023-06-01\r\n", kValid),
      503, "overloaded_error");
  // x-api-key opens the OpenAI routes too; their errors stay in OpenAI's shape.
  const Reply openai =
      request(server, "POST", "/v1/chat/completions", "x-api-key: right-key\r\n", "{}");
  EXPECT_EQ(openai.status, 400);
  EXPECT_TRUE(openai.body["error"].contains("param")) << openai.body.dump();
  const Reply openai_401 = request(server, "POST", "/v1/chat/completions", "", "{}");
  EXPECT_EQ(openai_401.status, 401);
  EXPECT_FALSE(openai_401.body.contains("type")) << openai_401.body.dump();
}

// /health while loading says where the load is (here: nothing has started, so "opening").
TEST(AnthropicRoutes, HealthWhileLoadingSaysTheStage) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(ServerOptions{}, {});
  const Reply r = request(server, "GET", "/health", "", "");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body["status"], "loading") << r.body.dump();
  EXPECT_EQ(r.body["stage"], "opening") << r.body.dump();
  EXPECT_FALSE(r.body.contains("progress")) << r.body.dump();
}

TEST(AnthropicRoutes, ErrorsInAnthropicsShape) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(ServerOptions{}, {});
  const Reply missing =
      request(server, "POST", "/v1/messages", "",
              R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})");
  expect_anthropic_error(missing, 400, "invalid_request_error");
  EXPECT_NE(missing.body["error"]["message"].get<std::string>().find("max_tokens"),
            std::string::npos);
  expect_anthropic_error(request(server, "POST", "/v1/messages", "", "{not json"), 400,
                         "invalid_request_error");
  expect_anthropic_error(
      request(server, "POST", "/v1/messages/count_tokens", "",
              R"({"messages": [{"role": "user", "content": [{"type": "image"}]}]})"),
      400, "invalid_request_error");
  expect_anthropic_error(request(server, "POST", "/v1/messages/count_tokens", "",
                                 R"({"messages": [{"role": "user", "content": "Hi"}]})"),
                         503, "overloaded_error");
  expect_anthropic_error(request(server, "POST", "/v1/messages/batches", "", "{}"), 404,
                         "not_found_error");
}

}  // namespace
}  // namespace jitllm::server
