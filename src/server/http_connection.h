// GuardedHttpServer: cpp-httplib's Server with the connection handling a public port needs and
// Debian 12's httplib (0.11) does not have. httplib keeps parsing HTTP, routing and writing
// responses; this class owns each accepted socket instead of httplib's own loop:
//   - the request head (request line + headers) is read and checked here first, within a
//     deadline: bare CR or LF, obs-fold lines, an over-long request line (414) or head (431) are
//     answered at once and the connection closed;
//   - the body must arrive within its own deadline; every read wakes up when the server stops;
//   - each client address may have only so many connections still sending a request: one more
//     evicts that address's oldest, so a slowloris client cannot hold every HTTP thread; and all
//     addresses together as many as leave two threads free (silent connections from many
//     addresses, idle keep-alive ones included), the longest-waiting evicted first;
//   - the handler can ask whether its client is still there (non-streaming requests cancel).
// A socket is owned by exactly one HTTP thread; other threads only shut it down (eviction) while
// holding the registry lock, which is also taken before the owner closes it.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <mutex>
#include <string>

namespace jitllm::server {

struct ConnectionLimits {
  int header_timeout_ms = 10'000;  // request line + headers, from the first byte
  int body_timeout_ms = 60'000;    // the body, from the end of the headers
  int write_timeout_ms = 30'000;   // one write to a client that does not read
  int keep_alive_ms = 5'000;       // an idle connection waits this long for its next request
  int requests_per_connection = 100;
  int reading_per_client = 8;      // connections of one address still sending a request
  // Past the cap, only a connection that has been sending this long is closed: a burst of new
  // connections (many clients behind one proxy, or a client pool) is not a slow client. A burst
  // past four times the cap closes the oldest regardless.
  int slow_after_ms = 1'000;
  // Connections of all addresses still sending a request or idle between requests, each holding
  // an HTTP thread: one more closes the longest-waiting of them whatever its age, so a flood of
  // silent connections (from one address or many) cannot hold every thread and some are always
  // left for requests that arrive whole. 0: no cap (HttpServer sets its thread count - 2).
  int reading_total = 0;
  size_t max_request_line = 8192;  // longer: 414
  size_t max_head_bytes = 16384;   // longer request line + headers: 431
};

class GuardedHttpServer;

// One accepted socket while its HTTP thread serves it.
class Connection {
 public:
  // True once the client closed its side or the socket failed (never blocks).
  bool peer_closed() const;
  // The handler has the whole request: this connection no longer counts as one still sending.
  void request_complete();
  // Close after this response (the rest of a refused body is not read).
  void close_after_response() { close_ = true; }
  // The last read ended at its deadline (the client sent too slowly).
  bool read_timed_out() const { return timed_out_; }

  // The connection the calling HTTP thread is serving; null outside a request.
  static Connection* current();

 private:
  friend class GuardedHttpServer;
  friend class ConnectionStream;
  Connection(GuardedHttpServer& server, int fd, std::string address);

  GuardedHttpServer& server_;
  int fd_;
  std::string address_;
  std::chrono::steady_clock::time_point deadline_{};
  std::atomic<bool> evicted_{false};
  bool reading_ = false;  // registered among its address's connections still sending
  std::chrono::steady_clock::time_point reading_since_{};
  bool close_ = false;
  bool timed_out_ = false;
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits = {});
  // httplib's bind, exclusive (no SO_REUSEPORT: a second server on the port is an error), then
  // listening with a deep backlog: the library listens with 5 (compiled into Debian's build), so
  // a burst of more new connections than that lost SYNs and waited a second for the retry.
  bool bind_to_port(const std::string& host, int port);
  int bind_to_any_port(const std::string& host);
  static constexpr int kListenBacklog = 1024;
  // Every read in progress returns within one poll slice; idle connections close.
  void begin_stop() { stopping_ = true; }
  void cap_reading_total(int n) { limits_.reading_total = n; }
  const ConnectionLimits& limits() const { return limits_; }
  // Connections still sending a request, over every address (for tests and /metrics).
  size_t reading_connections() const;
  // Serves one connected socket on the calling thread as if it had been accepted, then closes
  // it (tests and fuzz/fuzz_http_request.cpp drive requests through a socketpair with it).
  void serve_socket(socket_t sock) { process_and_close_socket(sock); }

 private:
  friend class Connection;
  friend class ConnectionStream;
  bool process_and_close_socket(socket_t sock) override;
  void serve(Connection& c);
  void start_reading(Connection& c);
  void stop_reading(Connection& c);

  void deepen_backlog();

  ConnectionLimits limits_;
  std::atomic<int> listen_fd_{-1};  // the socket httplib made to listen on
  std::atomic<bool> stopping_{false};
  mutable std::mutex registry_mutex_;
  std::map<std::string, std::list<Connection*>> reading_;  // by address, oldest first
  size_t n_reading_ = 0;                                   // over every address
  void evict(std::list<Connection*>& list, const char* why);  // its oldest; registry lock held
};

}  // namespace jitllm::server
