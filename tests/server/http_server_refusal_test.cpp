// HttpServer's refusals before routing (a wrong API key, a CORS preflight) on one keep-alive
// connection: the refused request's body is never read, so the connection must end with the
// refusal; otherwise the body is parsed as the next request (a request smuggled past the key
// check's response). Driven through a socketpair (GuardedHttpServer::serve_socket), no model.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "core/log.h"
#include "server/socket_talk.h"

namespace jitllm::server {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

ServerOptions keyed() {
  ServerOptions o;
  o.api_key = "right-key";
  o.cors_origins = {"https://app.example"};
  return o;
}

const std::string kSmuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer right-key\r\n\r\n";

std::string post(const std::string& path, const std::string& auth, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST(HttpServerRefusal, WrongKeyPostClosesTheConnectionBeforeItsBody) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(keyed(), {});
  const std::string out = talk_on_socketpair(server, post("/v1/completions", "Bearer wrong", kSmuggled));
  EXPECT_EQ(count(out, "HTTP/1.1 "), 1u) << out;
  EXPECT_EQ(out.rfind("HTTP/1.1 401", 0), 0u) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"object\":\"list\""), std::string::npos) << "the body was answered: " << out;
}

TEST(HttpServerRefusal, ChunkedBodyOfARefusedPostIsNotParsed) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(keyed(), {});
  const std::string chunk = kSmuggled;
  char size[16];
  std::snprintf(size, sizeof size, "%zx", chunk.size());
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n" +
                          std::string(size) + "\r\n" + chunk + "\r\n0\r\n\r\n";
  const std::string out = talk_on_socketpair(server, req);
  EXPECT_EQ(count(out, "HTTP/1.1 "), 1u) << out;
  EXPECT_EQ(out.rfind("HTTP/1.1 401", 0), 0u) << out;
}

TEST(HttpServerRefusal, PreflightWithABodyDoesNotAnswerTheBody) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(keyed(), {});
  const std::string req = "OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
                          "Content-Length: " + std::to_string(kSmuggled.size()) + "\r\n\r\n" + kSmuggled;
  const std::string out = talk_on_socketpair(server, req);
  EXPECT_EQ(count(out, "HTTP/1.1 "), 1u) << out;
  EXPECT_EQ(out.find("\"object\":\"list\""), std::string::npos) << out;
}

// One Range header of many ranges made httplib copy the response once per range (a 60 KB POST
// answered with 171 MB); a multipart body reached a reader set up for plain bodies (a 500,
// bad_function_call). Both are refused before routing, on every route.
TEST(HttpServerRefusal, RangesAndMultipartBodiesAreRefused) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(ServerOptions{}, {});
  std::string ranges = "Range: bytes=0-";
  for (int i = 0; i < 1023; ++i) ranges += ",0-";
  for (const char* path : {"/metrics", "/v1/models"}) {
    const std::string out = talk_on_socketpair(server, std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n" + ranges + "\r\n\r\n");
    EXPECT_EQ(out.rfind("HTTP/1.1 416", 0), 0u) << out.substr(0, 300);
    EXPECT_LT(out.size(), size_t(4096)) << path;
  }
  const std::string body = R"({"prompt": "x"})";
  std::string out = talk_on_socketpair(server, "POST /tokenize HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n"
                                 "Content-Type: application/json\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(out.rfind("HTTP/1.1 416", 0), 0u) << out;
  const std::string form = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--b--\r\n";
  out = talk_on_socketpair(server, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: " +
                     std::to_string(form.size()) + "\r\n\r\n" + form);
  EXPECT_EQ(out.rfind("HTTP/1.1 415", 0), 0u) << out;
  EXPECT_NE(out.find("multipart/form-data bodies are not accepted"), std::string::npos) << out;
}

TEST(HttpServerRefusal, AcceptedRequestsStillShareTheConnection) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(keyed(), {});
  // Two keyed requests, pipelined: both answered (/v1/models lists nothing before loading).
  const std::string out = talk_on_socketpair(server, kSmuggled + kSmuggled);
  EXPECT_EQ(count(out, "HTTP/1.1 200"), 2u) << out;
  // A keyed POST whose body is read (503: no model loaded yet), then a keyed GET: both answered.
  const std::string out2 = talk_on_socketpair(server, post("/v1/completions", "Bearer right-key",
                                                 R"({"prompt":"x"})") + kSmuggled);
  EXPECT_EQ(count(out2, "HTTP/1.1 "), 2u) << out2;
  EXPECT_EQ(out2.rfind("HTTP/1.1 503", 0), 0u) << out2;
}

}  // namespace
}  // namespace jitllm::server
