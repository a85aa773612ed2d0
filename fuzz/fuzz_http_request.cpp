// libFuzzer target for jitllmd's request handling: raw bytes as what a client sends on one
// connection, through GuardedHttpServer's head checks, httplib's parsing and HttpServer's routes
// (a socketpair, GuardedHttpServer::serve_socket; no model is loaded, so the generation routes
// validate their JSON and answer 503), or as a JSON body straight into the request parsers.
// The first byte picks:
//   bit 0 clear: HTTP; bit 1 set: the server wants 'Authorization: Bearer k3y';
//   bit 0 set:   JSON: parse_json_body, then parse_completion_request, parse_chat_request,
//                parse_anthropic_request (messages and count_tokens), parse_responses_request
//                (and its truncations) and parse_systemone_request, each refusing with
//                ApiError / jitllm::Error only.
// Findings: a crash or sanitizer report, another exception type, a 500 (nothing the client sends
// is an internal error), a response that does not start "HTTP/1.1 ", and any response after a
// request refused before routing (its body was not read: the rest is no request of its own).
// Seeds: fuzz/corpus/http_request (the first byte '0' HTTP, '2' HTTP with a key, '1' JSON).
//   build/asan/fuzz/fuzz_http_request -max_total_time=30 -max_len=65536 CORPUS fuzz/corpus/http_request
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <string_view>
#include <thread>

#include "app/systemone.h"
#include "core/error.h"
#include "core/log.h"
#include "server/anthropic_format.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/request.h"
#include "server/responses_request.h"

namespace {

using jitllm::server::HttpServer;

HttpServer* g_open = nullptr;   // no API key
HttpServer* g_keyed = nullptr;  // api_key "k3y"

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_http_request: %s\n%.*s\n", what, int(std::min<size_t>(detail.size(), 4000)),
               detail.data());
  std::abort();
}

// What the server writes back for `bytes` sent on one connection that the client then half-closes.
std::string serve(HttpServer& server, const uint8_t* bytes, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  std::string out;
  std::thread reader([&] {
    char buf[16384];
    ssize_t n;
    while ((n = ::recv(fds[0], buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
  });
  size_t sent = 0;
  while (sent < size) {  // the input fits the socket buffer (-max_len 65536)
    const ssize_t n = ::send(fds[0], bytes + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  server.http().serve_socket(fds[1]);  // closes fds[1]
  reader.join();
  ::close(fds[0]);
  return out;
}

// Walks the responses in `out`: each must start with a status line, none may be a 500, and a
// refusal from before routing (401) must be the last.
void check_responses(const std::string& out, bool keyed) {
  size_t at = 0;
  bool refused = false;
  while (at < out.size()) {
    if (out.compare(at, 9, "HTTP/1.1 ") != 0 || out.size() < at + 12) finding("not a response", out.substr(at));
    if (refused) finding("a response after a 401 (the refused request's body was parsed)", out);
    const int status = std::atoi(out.c_str() + at + 9);
    if (status == 500) finding("500 for a client's bytes", out.substr(at));
    refused = keyed && status == 401;
    const size_t head_end = out.find("\r\n\r\n", at);
    if (head_end == std::string::npos) finding("a response head without its end", out.substr(at));
    const std::string_view head(out.data() + at, head_end - at);
    // Every response here has a Content-Length (nothing streams without a model).
    const size_t cl = head.find("\r\nContent-Length: ");
    if (cl == std::string_view::npos) finding("a response without Content-Length", std::string(head));
    at = head_end + 4;
    // A HEAD request's answer has no body: the next response follows the head at once.
    if (out.compare(at, 9, "HTTP/1.1 ") != 0)
      at += size_t(std::strtoull(head.data() + cl + 18, nullptr, 10));
  }
}

void parse_json(const std::string& text) {
  nlohmann::json body;
  try {
    body = jitllm::server::parse_json_body(text);
  } catch (const jitllm::server::ApiError&) {
    return;
  }
  try {
    (void)jitllm::server::parse_completion_request(body);
  } catch (const jitllm::server::ApiError&) {
  }
  try {
    const jitllm::server::ChatRequest r = jitllm::server::parse_chat_request(body);
    // The chat route hands each message to the template as it was sent.
    for (const auto& m : r.messages) (void)nlohmann::ordered_json::parse(m.raw.dump());
  } catch (const jitllm::server::ApiError&) {
  }
  for (const bool count_tokens : {false, true}) {
    try {
      const jitllm::server::AnthropicRequest r =
          jitllm::server::parse_anthropic_request(body, nullptr, count_tokens);
      for (const auto& m : r.chat.messages) (void)nlohmann::ordered_json::parse(m.raw.dump());
    } catch (const jitllm::server::ApiError&) {
    }
  }
  try {
    const auto r = jitllm::server::parse_responses_request(nlohmann::ordered_json::parse(text));
    for (const auto& m : r.chat.messages) (void)nlohmann::ordered_json::parse(m.raw.dump());
    for (size_t start : jitllm::server::truncation_starts(r.chat.messages))
      (void)jitllm::server::truncated(r, start);
  } catch (const jitllm::server::ApiError&) {
  }
  try {
    (void)jitllm::app::parse_systemone_request(body);
  } catch (const jitllm::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  jitllm::set_log_threshold(jitllm::LogLevel::Error);  // no access line per input
  jitllm::server::ServerOptions open;
  open.max_body_bytes = 16384;
  open.cors_origins = {"https://app.example"};
  open.connection.write_timeout_ms = 2000;
  jitllm::server::ServerOptions keyed = open;
  keyed.api_key = "k3y";
  // Never destroyed: libFuzzer may exit from any thread.
  g_open = new HttpServer(open, {});
  g_keyed = new HttpServer(keyed, {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  if (mode & 1) {
    parse_json(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
    return 0;
  }
  const bool keyed = mode & 2;
  check_responses(serve(keyed ? *g_keyed : *g_open, data + 1, size - 1), keyed);
  return 0;
}
