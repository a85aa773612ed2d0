// Test helper: everything the server answers to `bytes` sent on one connection of a socketpair
// (GuardedHttpServer::serve_socket, no listening socket, no model needed). The client closes its
// sending side after the bytes, as a client waiting for the answers would not; the server sees
// the same bytes.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "server/http_server.h"

namespace jitllm::server {

inline std::string talk_on_socketpair(HttpServer& server, const std::string& bytes) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::string out;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fds[0], buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
  });
  EXPECT_EQ(::send(fds[0], bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
  ::shutdown(fds[0], SHUT_WR);
  server.http().serve_socket(fds[1]);  // closes fds[1]
  reader.join();
  ::close(fds[0]);
  return out;
}

}  // namespace jitllm::server
