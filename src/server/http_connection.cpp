// GuardedHttpServer: the per-socket loop (head checks, deadlines, eviction) around httplib's
// request processing. See http_connection.h for what it guarantees.
#include "server/http_connection.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>

#include "core/log.h"
#include "server/api_error.h"

namespace jitllm::server {

namespace {

using Clock = std::chrono::steady_clock;

thread_local Connection* t_current = nullptr;

// Reads and waits are cut into slices this long so a stop or an eviction is seen promptly.
constexpr int kPollSliceMs = 100;
constexpr size_t kRecvBytes = 16384;

std::string address_of(int fd, int* port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    if (port) *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    if (port) *port = ntohs(a->sin6_port);
  }
  return text;
}

const char* reason_of(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    default: return "Error";
  }
}

// A whole response for a request refused before httplib saw it; the connection closes after it.
std::string refusal(int status, const std::string& message) {
  const std::string body =
      ApiError(status, "invalid_request_error", message).body().dump(-1, ' ', false,
                                                                       nlohmann::json::error_handler_t::replace);
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                     "Connection: close\r\n\r\n{}",
                     status, reason_of(status), body.size(), body);
}

// What reading a request head ended with.
enum class Head { Complete, Closed, TimedOut, LineTooLong, TooLarge, Malformed };

}  // namespace

// httplib's view of the socket: bytes already read (the head) first, then the socket, every
// wait bounded by the connection's deadline and cut short by a stop or an eviction.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, GuardedHttpServer& s) : c_(c), s_(s) {}

  bool is_readable() const override { return pos_ < buf_.size() || wait(POLLIN) > 0; }
  bool is_writable() const override { return !c_.peer_closed() && wait_out() > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == buf_.size() && !refill()) return -1;
    const size_t n = std::min(size, buf_.size() - pos_);
    std::memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      if (wait_out() <= 0) return -1;
      const ssize_t n = ::send(c_.fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return -1;
      done += size_t(n);
    }
    return ssize_t(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = address_of(c_.fd_, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    port = 0;
    ip.clear();
    if (getsockname(c_.fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }
  socket_t socket() const override { return c_.fd_; }

  bool has_buffered() const { return pos_ < buf_.size(); }

  // Reads until the buffer holds a whole request head, checking it as it arrives: lines end in
  // CRLF (a bare CR or LF is refused, as request smuggling needs them), the request line fits
  // max_request_line, the head fits max_head_bytes. `length` is the head's, CRLFCRLF included.
  Head fill_head(size_t& length) {
    const ConnectionLimits& lim = s_.limits();
    if (pos_ == buf_.size()) {  // so refill() never moves the bytes under `checked`
      buf_.clear();
      pos_ = 0;
    }
    size_t checked = pos_;  // bytes before this are known to be well formed
    while (true) {
      const std::string_view data(buf_.data() + pos_, buf_.size() - pos_);
      const size_t end = data.find("\r\n\r\n");
      // Only the head's bytes: what follows it is the body (or the next request).
      const size_t head_end = end == std::string_view::npos ? buf_.size() : pos_ + end + 4;
      for (; checked < head_end; ++checked) {
        const char ch = buf_[checked];
        if (ch == '\n' && (checked == pos_ || buf_[checked - 1] != '\r')) return Head::Malformed;
        if (ch == '\r' && checked + 1 == buf_.size()) break;  // its LF is still to come
        if (ch == '\r' && buf_[checked + 1] != '\n') return Head::Malformed;
      }
      const size_t line_end = data.find("\r\n");
      if (line_end == std::string_view::npos ? data.size() > lim.max_request_line
                                             : line_end > lim.max_request_line)
        return Head::LineTooLong;
      if (end != std::string_view::npos) {
        length = end + 4;
        return length > lim.max_head_bytes ? Head::TooLarge : Head::Complete;
      }
      if (data.size() > lim.max_head_bytes) return Head::TooLarge;
      if (!refill()) return c_.timed_out_ ? Head::TimedOut : Head::Closed;
    }
  }

  std::string_view head(size_t length) const { return {buf_.data() + pos_, length}; }

  // Waits for readable bytes until the connection's deadline; false when none came.
  bool wait_readable() { return has_buffered() || wait(POLLIN) > 0; }

 private:
  // Appends what the socket has (waiting until the deadline); false on end, error or timeout.
  bool refill() {
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    }
    if (wait(POLLIN) <= 0) return false;
    const size_t old = buf_.size();
    buf_.resize(old + kRecvBytes);
    ssize_t n;
    do {
      n = ::recv(c_.fd_, buf_.data() + old, kRecvBytes, 0);
    } while (n < 0 && errno == EINTR);
    buf_.resize(old + size_t(std::max<ssize_t>(n, 0)));
    return n > 0;
  }

  // 1: ready; 0: the deadline passed, the server stops or the connection was evicted; -1: error.
  int wait(short events) const {
    while (true) {
      if (s_.stopping_ || c_.evicted_) return 0;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c_.deadline_ -
                                                                               Clock::now());
      if (left.count() <= 0) {
        c_.timed_out_ = true;
        return 0;
      }
      pollfd p{c_.fd_, events, 0};
      const int r = ::poll(&p, 1, int(std::min<int64_t>(left.count(), kPollSliceMs)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -1;
      if (r > 0) return 1;
    }
  }

  int wait_out() const {
    const auto until = Clock::now() + std::chrono::milliseconds(s_.limits().write_timeout_ms);
    while (true) {
      if (c_.evicted_) return 0;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return 0;
      pollfd p{c_.fd_, POLLOUT, 0};
      const int r = ::poll(&p, 1, int(std::min<int64_t>(left, kPollSliceMs)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 || (r > 0 && (p.revents & (POLLERR | POLLHUP)))) return -1;
      if (r > 0) return 1;
    }
  }

  Connection& c_;
  GuardedHttpServer& s_;
  std::string buf_;  // bytes read and not yet handed to httplib: [pos_, size)
  size_t pos_ = 0;
};

Connection::Connection(GuardedHttpServer& server, int fd, std::string address)
    : server_(server), fd_(fd), address_(std::move(address)) {}

bool Connection::peer_closed() const {
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return true;
  return evicted_ || (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void Connection::request_complete() { server_.stop_reading(*this); }

Connection* Connection::current() { return t_current; }

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  if (limits_.reading_per_client < 1) limits_.reading_per_client = 1;
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port and
  // take half its connections: bind exclusively (SO_REUSEADDR only allows a restart over
  // TIME_WAIT sockets).
  set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
}

void GuardedHttpServer::deepen_backlog() {
  // listen() again on a listening socket sets its backlog (Linux).
  if (const int fd = listen_fd_; fd >= 0 && ::listen(fd, kListenBacklog) != 0)
    log(LogLevel::Warn, "could not deepen the listen backlog: {}", std::strerror(errno));
}

bool GuardedHttpServer::bind_to_port(const std::string& host, int port) {
  if (!httplib::Server::bind_to_port(host, port)) return false;
  deepen_backlog();
  return true;
}

int GuardedHttpServer::bind_to_any_port(const std::string& host) {
  const int port = httplib::Server::bind_to_any_port(host);
  if (port >= 0) deepen_backlog();
  return port;
}

size_t GuardedHttpServer::reading_connections() const {
  std::lock_guard lock(registry_mutex_);
  return n_reading_;
}

void GuardedHttpServer::evict(std::list<Connection*>& list, const char* why) {
  Connection* oldest = list.front();
  list.pop_front();
  --n_reading_;
  oldest->reading_ = false;
  oldest->evicted_ = true;
  ::shutdown(oldest->fd_, SHUT_RDWR);
  log(LogLevel::Warn, "{}: {}; closed its connection waiting longest", oldest->address_, why);
}

void GuardedHttpServer::start_reading(Connection& c) {
  std::lock_guard lock(registry_mutex_);
  if (c.reading_) return;
  std::list<Connection*>& list = reading_[c.address_];
  const auto now = Clock::now();
  // Past the cap, every connection sending for longer than slow_after_ms goes, oldest first; a
  // burst may hold up to four times the cap until its connections have had that long.
  while (int(list.size()) >= limits_.reading_per_client &&
         (now - list.front()->reading_since_ >= std::chrono::milliseconds(limits_.slow_after_ms) ||
          int(list.size()) >= 4 * limits_.reading_per_client)) {
    // The oldest is the one that has been sending longest: a slow client, not a burst.
    evict(list, fmt::format("more than {} connections still sending a request, the oldest for "
                            "over {} ms", limits_.reading_per_client, limits_.slow_after_ms)
                    .c_str());
  }
  // Over every address: the longest-waiting connection goes, so threads stay free.
  while (limits_.reading_total > 0 && n_reading_ >= size_t(limits_.reading_total)) {
    std::list<Connection*>* longest = nullptr;
    for (auto& [address, l] : reading_)
      if (!l.empty() && (!longest || l.front()->reading_since_ < longest->front()->reading_since_))
        longest = &l;
    if (!longest) break;
    evict(*longest, fmt::format("{} connections of all clients waiting for a request hold the "
                                "HTTP threads", n_reading_).c_str());
  }
  list.push_back(&c);
  ++n_reading_;
  c.reading_ = true;
  c.reading_since_ = now;
  for (auto it = reading_.begin(); it != reading_.end();)  // addresses left with none
    it = it->second.empty() ? reading_.erase(it) : std::next(it);
}

void GuardedHttpServer::stop_reading(Connection& c) {
  std::lock_guard lock(registry_mutex_);
  if (!c.reading_) return;
  c.reading_ = false;
  --n_reading_;
  auto it = reading_.find(c.address_);
  if (it == reading_.end()) return;
  it->second.remove(&c);
  if (it->second.empty()) reading_.erase(it);
}

namespace {

// Whether the head has a header line named `lower_name` (ASCII, any case).
bool has_header(std::string_view head, std::string_view lower_name) {
  for (size_t at = head.find("\r\n"); at != head.npos; at = head.find("\r\n", at + 2)) {
    const std::string_view line = head.substr(at + 2);
    if (line.size() <= lower_name.size() || line[lower_name.size()] != ':') continue;
    bool same = true;
    for (size_t i = 0; i < lower_name.size() && same; ++i)
      same = char(std::tolower(uint8_t(line[i]))) == lower_name[i];
    if (same) return true;
  }
  return false;
}

}  // namespace

void GuardedHttpServer::serve(Connection& c) {
  ConnectionStream strm(c, *this);
  auto after = [](int ms) { return Clock::now() + std::chrono::milliseconds(ms); };
  auto refuse = [&](int status, const std::string& message) {
    const std::string text = refusal(status, message);
    strm.write(text.data(), text.size());
  };
  for (int n = 0; n < limits_.requests_per_connection && !stopping_; ++n) {
    if (n > 0 && !strm.has_buffered()) {
      c.deadline_ = after(limits_.keep_alive_ms);
      start_reading(c);  // idle, it holds a thread as a silent connection does
      if (!strm.wait_readable()) return;  // idle: close quietly
    }
    c.deadline_ = after(limits_.header_timeout_ms);
    c.timed_out_ = false;
    start_reading(c);
    size_t head_bytes = 0;
    switch (strm.fill_head(head_bytes)) {
      case Head::Complete: break;
      case Head::Closed: return;
      case Head::TimedOut:
        return refuse(408, fmt::format("the request headers did not arrive within {} ms",
                                       limits_.header_timeout_ms));
      case Head::LineTooLong:
        return refuse(414, fmt::format("the request line is longer than {} bytes",
                                       limits_.max_request_line));
      case Head::TooLarge:
        return refuse(431, fmt::format("the request headers are larger than {} bytes",
                                       limits_.max_head_bytes));
      case Head::Malformed:
        return refuse(400, "the request head has a line that does not end in CRLF");
    }
    // obs-fold (a header line starting with a space or tab) is refused, as RFC 9112 allows.
    const std::string_view head = strm.head(head_bytes);
    if (head.find("\r\n ") != head.npos || head.find("\r\n\t") != head.npos)
      return refuse(400, "the request head has a folded header line (obs-fold)");
    // Control characters other than HTAB have no place in a head (RFC 9110 field values); a NUL
    // would cut the value short for any C string reader downstream.
    if (std::any_of(head.begin(), head.end(), [](char ch) {
          const auto u = uint8_t(ch);
          return (u < 0x20 && ch != '\t' && ch != '\r' && ch != '\n') || u == 0x7F;
        }))
      return refuse(400, "the request head has a control character (NUL, ...)");
    // httplib answers a Range header with those byte ranges of the response, each a copy (one
    // header of 1,024 ranges turned a 60 KB POST into a 171 MB answer), even of an error. No
    // route serves files a client would resume: ranges are refused here, before httplib.
    if (has_header(head, "range"))
      return refuse(416, "Range requests are not supported; ask for the whole response");
    c.deadline_ = after(limits_.body_timeout_ms);
    bool connection_closed = false;
    const bool last = n + 1 == limits_.requests_per_connection || stopping_;
    bool ok = false;
    try {
      ok = process_request(strm, last, connection_closed, nullptr);
    } catch (const std::exception& e) {
      // httplib catches the handlers' exceptions; this is for what it does not (e.g. a content
      // provider): the connection ends, the thread and the server go on.
      log(LogLevel::Error, "{}: request failed: {}", c.address_, e.what());
      return;
    } catch (...) {
      log(LogLevel::Error, "{}: request failed", c.address_);
      return;
    }
    stop_reading(c);
    if (!ok || connection_closed || c.close_ || c.evicted_) return;
  }
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  Connection c(*this, sock, address_of(sock, nullptr));
  t_current = &c;
  serve(c);
  t_current = nullptr;
  stop_reading(c);  // under the registry lock: no eviction can touch the socket after this
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return true;
}

}  // namespace jitllm::server
