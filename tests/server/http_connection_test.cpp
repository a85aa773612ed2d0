// GuardedHttpServer on loopback: heads that are not CRLF-clean, obs-fold, over-long request
// lines and heads are answered at once (no wait for a timeout); slow heads end at their deadline
// with 408; one address's slow connections past the cap are closed oldest first while its next
// request is served, and a burst of its new connections is not taken for slow ones; a stop ends
// every slow reader promptly.
#include "server/http_connection.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "server/raw_http.h"

namespace jitllm::server {
namespace {

using testing::RawClient;
using testing::status_of;
using Clock = std::chrono::steady_clock;

struct Running {
  std::unique_ptr<GuardedHttpServer> server;
  std::thread thread;
  int port = 0;
  explicit Running(ConnectionLimits limits) : server(std::make_unique<GuardedHttpServer>(limits)) {
    server->Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("fine", "text/plain");
    });
    port = server->bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server->listen_after_bind(); });
    while (!server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Running() { stop(); }
  double stop() {
    if (!thread.joinable()) return 0;
    const auto t0 = Clock::now();
    server->begin_stop();
    server->stop();
    thread.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

// Sends `bytes` and returns the response's status and how long it took.
std::pair<int, double> exchange(int port, const std::string& bytes) {
  RawClient c(port);
  EXPECT_TRUE(c.connected());
  const auto t0 = Clock::now();
  c.send(bytes);
  const std::string response = c.read_all(5000);
  return {status_of(response), std::chrono::duration<double>(Clock::now() - t0).count()};
}

TEST(GuardedHttpServer, ServesAPlainRequestAndKeepsTheConnection) {
  Running r({});
  RawClient c(r.port);
  ASSERT_TRUE(c.connected());
  c.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string first = c.read_all(300);
  EXPECT_EQ(status_of(first), 200) << first;
  c.send("GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(c.read_all(2000)), 200);
}

TEST(GuardedHttpServer, BadHeadsAreRefusedAtOnce) {
  Running r({});
  const struct {
    std::string head;
    int status;
  } cases[] = {
      {"GET /ok HTTP/1.1\nHost: x\n\n", 400},                      // bare LF
      {"GET /ok HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", 400},          // bare CR
      {"GET /ok HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},     // obs-fold
      {"GET /ok HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n", 400},
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET /" + std::string(9000, 'a'), 414},  // no line end yet: refused without waiting
      {"GET /ok HTTP/1.1\r\nX: " + std::string(20000, 'b') + "\r\n\r\n", 431},
      {std::string("GET /ok HTTP/1.1\r\nX: a\0b\r\n\r\n", 28), 400},  // NUL in a value
      {"GET /ok HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400},                    // another control
      {"GET /ok HTTP/1.1\r\nRange: bytes=0-1\r\n\r\n", 416},             // ranges: not served
  };
  for (const auto& c : cases) {
    const auto [status, seconds] = exchange(r.port, c.head);
    EXPECT_EQ(status, c.status) << c.head.substr(0, 60);
    EXPECT_LT(seconds, 1.0) << c.head.substr(0, 60);
  }
}

TEST(GuardedHttpServer, SlowHeadersEndWith408AtTheirDeadline) {
  ConnectionLimits lim;
  lim.header_timeout_ms = 400;
  Running r(lim);
  RawClient c(r.port);
  const auto t0 = Clock::now();
  c.send("GET /ok HTTP/1.1\r\nHost: x\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  c.send("X-A: 1\r\n");  // a line now and then does not extend the deadline
  const std::string response = c.read_all(3000);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(status_of(response), 408) << response;
  EXPECT_GT(seconds, 0.35);
  EXPECT_LT(seconds, 1.5);
}

TEST(GuardedHttpServer, SlowClientsPastTheCapAreClosedOldestFirst) {
  ConnectionLimits lim;
  lim.reading_per_client = 3;
  lim.slow_after_ms = 100;
  Running r(lim);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<RawClient>(r.port));
    slow.back()->send("GET /ok HTTP/1.1\r\n");  // and never more
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The same address still gets its answer, at once.
  const auto [status, seconds] = exchange(r.port, "GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status, 200);
  EXPECT_LT(seconds, 1.0);
  // The oldest slow ones were closed; at most the cap are still open.
  EXPECT_TRUE(slow[0]->closed_within(1000));
  EXPECT_TRUE(slow[1]->closed_within(1000));
  EXPECT_LE(r.server->reading_connections(), size_t(lim.reading_per_client));
}

// No exception a handler or a streamed body throws, std::exception or not, leaves its HTTP
// thread: the connection ends or gets a 500, and the server answers the next request (issue 18
// item 4: nothing reaches std::terminate).
TEST(GuardedHttpServer, ThrowsInHandlersAndStreamsEndTheRequestNotTheServer) {
  Running r({});
  r.server->Get("/throw-int", [](const httplib::Request&, httplib::Response&) { throw 42; });
  r.server->Get("/throw-error", [](const httplib::Request&, httplib::Response&) {
    throw std::runtime_error("injected handler fault");
  });
  for (const bool standard : {false, true})
    r.server->Get(standard ? "/stream-error" : "/stream-int",
                  [standard](const httplib::Request&, httplib::Response& res) {
                    res.set_chunked_content_provider("text/plain", [standard](size_t, httplib::DataSink&) -> bool {
                      if (standard) throw std::runtime_error("injected stream fault");
                      throw 42;
                    });
                  });
  for (const char* path : {"/throw-int", "/throw-error", "/stream-int", "/stream-error"}) {
    const std::string request = std::string("GET ") + path + " HTTP/1.1\r\nConnection: close\r\n\r\n";
    const auto [status, seconds] = exchange(r.port, request);
    EXPECT_TRUE(status == 500 || status == 200 || status == 0) << path << ": " << status;
    EXPECT_LT(seconds, 2.0) << path;
    EXPECT_EQ(exchange(r.port, "GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n").first, 200)
        << "after " << path;
  }
}

// Silent connections (a connect and nothing more) and idle keep-alive ones, more than the server
// has threads: past reading_total the longest-waiting goes whatever its age or address, so a
// request that arrives whole is still answered at once (all 8 test threads were held for the
// header timeout before).
TEST(GuardedHttpServer, SilentAndIdleConnectionsCannotHoldEveryThread) {
  ConnectionLimits lim;
  lim.reading_per_client = 100;  // the per-address cap is not what frees them
  lim.reading_total = 6;         // the test server's 8 threads - 2
  lim.header_timeout_ms = 30'000;
  lim.keep_alive_ms = 30'000;
  Running r(lim);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {  // idle after one request
    held.push_back(std::make_unique<RawClient>(r.port));
    held.back()->send("GET /ok HTTP/1.1\r\n\r\n");
  }
  for (int i = 0; i < 12; ++i) held.push_back(std::make_unique<RawClient>(r.port));  // silent
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto [status, seconds] = exchange(r.port, "GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status, 200);
  EXPECT_LT(seconds, 2.0);
  EXPECT_LE(r.server->reading_connections(), size_t(lim.reading_total));
  EXPECT_TRUE(held[0]->closed_within(1000)) << "the longest-waiting (idle) connection stays";
}

// Many connections of one address that are about to send (a client pool, a proxy) are not slow:
// past the cap, none is closed before it has been sending for slow_after_ms.
TEST(GuardedHttpServer, ABurstOfConnectionsIsNotMistakenForSlowClients) {
  ConnectionLimits lim;
  lim.reading_per_client = 3;
  Running r(lim);
  std::vector<std::unique_ptr<RawClient>> burst;
  for (int i = 0; i < 40; ++i) burst.push_back(std::make_unique<RawClient>(r.port));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto& c : burst) c->send("GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n");
  for (size_t i = 0; i < burst.size(); ++i) EXPECT_EQ(status_of(burst[i]->read_all(3000)), 200) << i;
}

// Forty connects at once all complete at once: the listen backlog holds them (with httplib's
// backlog of 5, dropped SYNs came back a second later).
TEST(GuardedHttpServer, ABurstOfConnectsIsAcceptedWithoutRetries) {
  Running r({});
  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<RawClient>> burst;
  for (int i = 0; i < 40; ++i) burst.push_back(std::make_unique<RawClient>(r.port));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 0.5);
  for (auto& c : burst) c->send("GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n");
  for (auto& c : burst) EXPECT_EQ(status_of(c->read_all(3000)), 200);
}

// Slow connections opened all at once are still capped: four times the cap at most while they
// are young, the cap once they are past slow_after_ms.
TEST(GuardedHttpServer, ABurstOfSlowConnectionsIsStillCapped) {
  ConnectionLimits lim;
  lim.reading_per_client = 1;
  lim.slow_after_ms = 150;
  Running r(lim);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 6; ++i) {  // fewer than the test server's 8 threads: all are read
    slow.push_back(std::make_unique<RawClient>(r.port));
    slow.back()->send("GET /ok HTTP/1.1\r\n");  // and never more
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(r.server->reading_connections(), size_t(4 * lim.reading_per_client));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(exchange(r.port, "GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n").first, 200);
  EXPECT_LE(r.server->reading_connections(), size_t(lim.reading_per_client));
}

TEST(GuardedHttpServer, StopEndsSlowReadersPromptly) {
  Running r({});
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(std::make_unique<RawClient>(r.port));
    slow.back()->send("POST /ok HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(r.stop(), 1.5);
}

}  // namespace
}  // namespace jitllm::server
