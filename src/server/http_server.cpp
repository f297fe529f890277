#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <utility>

namespace agentkv {
namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60 * 60 * 1000));
}

Clock::time_point after_seconds(double s) {
  return Clock::now() + std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

void set_send_timeout(int fd, double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

bool has_crlf(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

// Responses with these statuses never carry a body (RFC 9110 6.4.1).
bool bodiless_status(int status) { return status < 200 || status == 204 || status == 304; }

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// HttpResponseWriter

HttpResponseWriter::HttpResponseWriter(int fd, int version_minor, bool keep_alive, bool head_request,
                                       const std::atomic<bool>* stopping)
    : fd_(fd), http11_(version_minor >= 1), keep_alive_(keep_alive), head_request_(head_request),
      stopping_(stopping) {}

bool HttpResponseWriter::send_all(std::string_view data) {
  while (!broken_ && !data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_ = true;  // EPIPE / ECONNRESET, or EAGAIN after SO_SNDTIMEO: the client is not reading
      break;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return !broken_;
}

bool HttpResponseWriter::send_head(int status, std::string_view content_type, const HttpHeaders& extra,
                                   std::string_view framing) {
  if (state_ != State::kNone || broken_) return false;
  if (status < 100 || status > 999 || has_crlf(content_type)) return false;
  bool close_requested = false;
  for (const auto& [name, value] : extra) {
    if (name.empty() || has_crlf(name) || has_crlf(value) || name.find(':') != std::string::npos ||
        http_iequals(name, "content-length") || http_iequals(name, "transfer-encoding") ||
        http_iequals(name, "date")) {
      return false;
    }
    if (http_iequals(name, "connection")) {
      if (!http_iequals(value, "close")) return false;
      close_requested = true;
    }
  }
  if (close_requested || (stopping_ != nullptr && stopping_->load())) keep_alive_ = false;

  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + http_reason_phrase(status) + "\r\n";
  head += "Date: " + http_date() + "\r\n";
  if (!content_type.empty()) head += "Content-Type: " + std::string(content_type) + "\r\n";
  head += framing;
  for (const auto& [name, value] : extra) {
    if (!http_iequals(name, "connection")) head += name + ": " + value + "\r\n";
  }
  if (!keep_alive_) {
    head += "Connection: close\r\n";
  } else if (!http11_) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  state_ = State::kStreaming;
  return send_all(head);
}

bool HttpResponseWriter::respond(int status, std::string_view content_type, std::string_view body,
                                 const HttpHeaders& extra_headers) {
  const bool bodiless = bodiless_status(status);
  const std::string framing = bodiless ? "" : "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!send_head(status, bodiless ? "" : content_type, extra_headers, framing)) return false;
  state_ = State::kDone;
  if (bodiless || head_request_) return !broken_;
  return send_all(body);
}

bool HttpResponseWriter::start_stream(int status, std::string_view content_type,
                                      const HttpHeaders& extra_headers) {
  // HTTP/1.0 has no chunked coding: the body ends when the connection closes.
  chunked_ = http11_ && keep_alive_;
  if (!http11_) keep_alive_ = false;
  return send_head(status, content_type, extra_headers, chunked_ ? "Transfer-Encoding: chunked\r\n" : "");
}

bool HttpResponseWriter::write(std::string_view data) {
  if (state_ != State::kStreaming || broken_) return false;
  if (data.empty() || head_request_) return true;  // an empty chunk would end the stream
  if (!chunked_) return send_all(data);
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string chunk;
  chunk.reserve(static_cast<size_t>(n) + data.size() + 2);
  chunk.append(size, static_cast<size_t>(n)).append(data).append("\r\n");
  return send_all(chunk);
}

bool HttpResponseWriter::end_stream() {
  if (state_ != State::kStreaming || broken_) return false;
  state_ = State::kDone;
  if (!chunked_ || head_request_) return true;
  return send_all("0\r\n\r\n");
}

bool HttpResponseWriter::client_gone() {
  if (broken_) return true;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  // POLLHUP: both directions are shut (a reset after a write, or stop() cutting the socket).
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  if (!(p.revents & (POLLIN | POLLRDHUP))) return false;
  char c;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // a pipelined request: the client is still there
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // ECONNRESET
  // EOF: half-closed (still reading) or gone. Only a write tells which; a stream's writes do, and before
  // any response the interim 100 does (HTTP/1.0 has no 1xx: such a client is taken to be reading).
  if (state_ == State::kNone && http11_ && !probed_) {
    probed_ = true;
    if (!send_all("HTTP/1.1 100 Continue\r\n\r\n")) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------
// HttpServer

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start(HttpHandler handler) {
  if (listen_fd_ >= 0 || stopping_.load()) return make_error("HTTP server already started (or stopped)");
  if (options_.port < 0 || options_.port > 65535) {
    return make_error("invalid port " + std::to_string(options_.port) + " (expected 0..65535)");
  }
  if (options_.max_connections < 1) return make_error("max_connections must be at least 1");
  const std::string where = host_port(options_.host, options_.port);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string service = std::to_string(options_.port);
  const int gai = ::getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), service.c_str(),
                                &hints, &addrs);
  if (gai != 0) return make_error("cannot resolve host '" + options_.host + "': " + gai_strerror(gai));

  std::string last_error = "no usable address";
  for (addrinfo* a = addrs; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  ::freeaddrinfo(addrs);
  if (listen_fd_ < 0) return make_error("cannot bind " + where + ": " + last_error);

  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const std::string err = std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return make_error("cannot create the HTTP server wake pipe: " + err);
  }
  handler_ = std::move(handler);
  try {
    accept_thread_ = std::thread(&HttpServer::accept_loop, this);
  } catch (const std::exception& e) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return make_error(std::string("cannot start the HTTP accept thread: ") + e.what());
  }
  return Status();
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_pipe_[1] >= 0) {
    const char c = 'x';  // idle connections wake and close; the accept thread answers newcomers 503
    [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &c, 1);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = after_seconds(options_.drain_timeout_s);
    cv_.wait_until(lock, deadline, [&] { return active_.load() == 0; });
    // Handlers still running past the deadline: cut their sockets so writes fail and client_gone() is true.
    for (auto& c : connections_) {
      if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  stop_accepting_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);  // new connections are refused from here on
  listen_fd_ = -1;
  for (auto& c : connections_) {
    if (c->thread.joinable()) c->thread.join();
  }
  connections_.clear();
  for (int& fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void HttpServer::reap_finished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if ((*it)->done) finished.splice(finished.end(), connections_, it);
      it = next;
    }
  }
  for (auto& c : finished) c->thread.join();
}

namespace {

// The peer's address without its port: what the per-client cap counts.
std::string peer_address(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, text, sizeof text);
  }
  return text;
}

// Answers an error on a connection that will carry nothing else, and ends our side of it.
void refuse(int fd, int status, const std::string& message) {
  HttpResponseWriter w(fd, 1, /*keep_alive=*/false, /*head_request=*/false);
  w.respond(status, "application/json", http_error_json(message, "server_error"));
  ::shutdown(fd, SHUT_WR);
}

}  // namespace

int HttpServer::idle_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& c : connections_) n += !c->done && !c->evicted && c->phase == Phase::kIdle;
  return n;
}

bool HttpServer::evict_one(const std::string* client) {
  Connection* victim = nullptr;
  for (auto& c : connections_) {
    if (c->done || c->evicted || c->fd < 0 || c->phase == Phase::kHandler) continue;
    if (client != nullptr && c->client != *client) continue;
    // Idle before unfinished heads before unfinished bodies; within each, the one waiting longest.
    if (victim == nullptr || c->phase < victim->phase ||
        (c->phase == victim->phase && c->since < victim->since)) {
      victim = c.get();
    }
  }
  if (victim == nullptr) return false;
  victim->evicted = true;
  ++evicting_;
  ::shutdown(victim->fd, SHUT_RD);  // wakes its thread's poll; its write side stays for the 503
  return true;
}

bool HttpServer::admit(const std::string& client, int& status, std::string& message) {
  if (stopping_.load()) {
    status = 503;
    message = "server is shutting down; retry later";
    return false;
  }
  int from_client = 0;
  for (const auto& c : connections_) from_client += !c->done && !c->evicted && c->client == client;
  if (from_client >= options_.max_connections_per_client && !evict_one(&client)) {
    status = 429;
    message = "too many connections from " + client + " (the limit is " +
              std::to_string(options_.max_connections_per_client) + "); retry later";
    return false;
  }
  if (active_.load() - evicting_ >= options_.max_connections && !evict_one(nullptr)) {
    status = 503;
    message = "server is at its connection limit (" + std::to_string(options_.max_connections) + "); retry later";
    return false;
  }
  return true;
}

void HttpServer::accept_loop() {
  // Refused sockets linger here until the client closes or a short deadline passes, so the answer is
  // not lost to a reset caused by request bytes we never read.
  struct Rejected {
    int fd;
    Clock::time_point deadline;
  };
  std::vector<Rejected> rejected;
  std::vector<pollfd> fds;
  while (!stop_accepting_.load()) {
    reap_finished();
    // While draining the wake pipe stays readable: poll on a short timeout instead.
    const bool draining = stopping_.load();
    fds.assign({{listen_fd_, POLLIN, 0}, {draining ? -1 : wake_pipe_[0], POLLIN, 0}});
    int timeout_ms = draining ? 50 : 500;
    for (const Rejected& r : rejected) {
      fds.push_back({r.fd, POLLIN, 0});
      timeout_ms = std::min(timeout_ms, ms_until(r.deadline));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    for (size_t i = rejected.size(); i-- > 0;) {
      bool done = Clock::now() >= rejected[i].deadline;
      if (fds[2 + i].revents != 0) {
        char scratch[4096];
        const ssize_t n = ::recv(rejected[i].fd, scratch, sizeof scratch, MSG_DONTWAIT);
        done = done || n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
      }
      if (done) {
        ::close(rejected[i].fd);
        rejected.erase(rejected.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (!(fds[0].revents & POLLIN)) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (fd < 0) continue;  // EAGAIN, ECONNABORTED, EMFILE: try again on the next poll
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_send_timeout(fd, options_.send_timeout_s);

    const std::string client = peer_address(peer);
    int status = 503;
    std::string message = "cannot start a connection thread; retry later";
    bool accepted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (admit(client, status, message)) {
        auto conn = std::make_unique<Connection>();
        conn->fd = fd;
        conn->client = client;
        Connection* c = conn.get();
        try {
          ++active_;
          c->thread = std::thread(&HttpServer::serve, this, c, fd);
          connections_.push_back(std::move(conn));
          accepted = true;
        } catch (const std::exception&) {
          --active_;  // no thread: refused below
        }
      }
    }
    if (!accepted) {
      set_send_timeout(fd, 1.0);
      refuse(fd, status, message);
      if (rejected.size() >= 64) {
        ::close(rejected.front().fd);
        rejected.erase(rejected.begin());
      }
      rejected.push_back({fd, after_seconds(2.0)});
    }
  }
  for (const Rejected& r : rejected) ::close(r.fd);
}

bool HttpServer::enter(Connection* conn, Phase phase) {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn->evicted) return false;
  conn->phase = phase;
  conn->since = Clock::now();
  return true;
}

void HttpServer::serve(Connection* conn, int fd) {
  bool linger = false;
  serve_requests(conn, fd, linger);
  close_connection(conn, fd, linger);
}

void HttpServer::close_connection(Connection* conn, int fd, bool linger) {
  if (linger && !stopping_.load()) {
    // Half-close and drain, so a response is not destroyed by a reset for unread bytes: a client still
    // uploading reads the answer only once it notices it, which on a loaded machine can take seconds.
    // Draining goes on while bytes keep arriving (1 s idle at most, as nginx's lingering_timeout), up
    // to 5 s and one largest body in all (lingering_time), so a hostile sender cannot hold it longer.
    ::shutdown(fd, SHUT_WR);
    const auto hard_deadline = after_seconds(5.0);
    const size_t max_drain = options_.limits.max_body_bytes + options_.limits.max_header_bytes;
    size_t drained = 0;
    char scratch[16384];
    while (drained < max_drain) {
      const int wait_ms = std::min(ms_until(hard_deadline), 1000);
      pollfd p[2] = {{fd, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
      if (::poll(p, 2, wait_ms) <= 0 || p[1].revents != 0) break;
      const ssize_t n = ::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) break;
      if (n > 0) drained += static_cast<size_t>(n);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  conn->fd = -1;
  conn->done = true;
  if (conn->evicted) --evicting_;
  --active_;
  cv_.notify_all();
}

void HttpServer::serve_requests(Connection* conn, int fd, bool& linger) {
  HttpParser parser(options_.limits);
  std::vector<char> buf(64 * 1024);
  Phase phase = Phase::kHead;  // from the connect: see Phase
  bool fresh = true;           // no byte yet
  Clock::time_point phase_start = Clock::now(), last_byte = phase_start;
  double body_bytes = 0;
  // Whether a request has begun: only then is there someone to answer when the connection must end.
  const auto begun = [&] { return phase != Phase::kIdle && !fresh; };
  // An evicted or draining connection ends: a request begun is answered 503, an idle one just closes.
  const auto make_room = [&](const char* why) {
    if (!begun()) return;
    HttpResponseWriter w(fd, 1, false, false);
    w.respond(503, "application/json", http_error_json(why, "server_error"));
    linger = true;
  };
  // A large body is read and handled only while this connection holds one of the server's slots.
  struct LargeSlot {
    std::atomic<int>& taken;
    bool held = false;
    bool take(int cap) {
      if (held) return true;
      if (taken.fetch_add(1) >= cap) {
        taken.fetch_sub(1);
        return false;
      }
      return held = true;
    }
    void release() {
      if (held) taken.fetch_sub(1);
      held = false;
    }
    ~LargeSlot() { release(); }
  } large{large_bodies_};
  const auto refuse_large = [&] {
    HttpResponseWriter w(fd, 1, false, false);
    w.respond(503, "application/json",
              http_error_json("the server is reading its maximum of " + std::to_string(options_.max_large_bodies) +
                                  " request bodies over " + std::to_string(options_.large_body_bytes) + " bytes; retry",
                              "server_error"),
              {{"Retry-After", "1"}});
    linger = true;
  };
  while (true) {
    while (auto req = parser.next_request()) {
      if (req->body.size() > options_.large_body_bytes && !large.take(options_.max_large_bodies)) return refuse_large();
      const bool evicted = !enter(conn, Phase::kHandler);
      phase = Phase::kHandler;
      if (evicted) return make_room("server is at its connection limit; retry later");
      HttpResponseWriter w(fd, req->version_minor, req->keep_alive, req->method == "HEAD", &stopping_);
      bool threw = false;
      try {
        handler_(*req, w);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "agentkv http: handler for %s %s threw: %s\n", req->method.c_str(),
                     req->path.c_str(), e.what());
        threw = true;
      } catch (...) {
        std::fprintf(stderr, "agentkv http: handler for %s %s threw a non-standard exception\n",
                     req->method.c_str(), req->path.c_str());
        threw = true;
      }
      if (!w.started()) {
        w.respond(500, "application/json",
                  http_error_json(threw ? "internal error while handling the request"
                                        : "the handler sent no response",
                                  "server_error"));
      } else if (w.streaming()) {
        // A handler that returns mid-stream finished its output; one that threw leaves it truncated.
        if (threw || !w.end_stream()) return;
      }
      large.release();
      if (!w.keep_alive() || stopping_.load()) {
        linger = !w.failed();
        return;
      }
    }
    if (parser.failed()) {
      HttpResponseWriter w(fd, 1, /*keep_alive=*/false, /*head_request=*/false);
      w.respond(parser.error().status, "application/json", http_error_json(parser.error().message));
      linger = true;
      return;
    }
    // The phase of what is buffered now (a pipelined request may already have begun).
    const Phase now = !parser.mid_request() && !fresh ? Phase::kIdle
                      : parser.in_body()                ? Phase::kBody
                                                        : Phase::kHead;
    if (now != phase) {
      const bool evicted = !enter(conn, now);
      phase = now;
      phase_start = last_byte = Clock::now();
      body_bytes = 0;
      if (evicted) return make_room("server is at its connection limit; retry later");
      if (now == Phase::kBody && parser.body_length() > options_.large_body_bytes &&
          !large.take(options_.max_large_bodies))
        return refuse_large();
    }
    if (stopping_.load()) return make_room("server is shutting down; retry later");
    if (parser.take_continue_request()) {
      HttpResponseWriter w(fd, 1, true, false);
      if (!w.respond(100, "", "")) return;
    }

    // The earliest deadline of the phase: idle keep-alive, the head's, the body's minimum rate.
    Clock::time_point deadline = last_byte + std::chrono::milliseconds(static_cast<long long>(options_.idle_timeout_s * 1000));
    const char* late = "timed out waiting for the rest of the request";
    const auto at = [&](double seconds) {
      return phase_start + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    };
    if (phase == Phase::kHead && at(options_.header_timeout_s) < deadline) {
      deadline = at(options_.header_timeout_s);
      late = "the request head did not arrive in time";
    }
    if (phase == Phase::kBody && options_.body_min_rate > 0) {
      const auto rate_deadline = at(std::max(options_.body_grace_s, body_bytes / options_.body_min_rate));
      if (rate_deadline < deadline) {
        deadline = rate_deadline;
        late = "the request body arrived too slowly";
      }
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int ready = ::poll(p, 2, ms_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return;
    if (p[1].revents != 0) return make_room("server is shutting down; retry later");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (conn->evicted) return make_room("server is at its connection limit; retry later");
    }
    if (ready == 0) {
      if (Clock::now() < deadline) continue;  // poll's millisecond rounding woke us early
      if (begun()) {
        HttpResponseWriter w(fd, 1, false, false);
        w.respond(408, "application/json", http_error_json(late));
        linger = true;
      }
      return;
    }
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0 && parser.mid_request()) {
      // The client shut its side mid-request (e.g. a body shorter than its Content-Length); it may
      // still read, so say why nothing was served instead of closing silently.
      HttpResponseWriter w(fd, 1, false, false);
      w.respond(400, "application/json",
                http_error_json("the connection was closed before the request was complete"));
      return;
    }
    if (n <= 0) return;
    fresh = false;
    if (phase == Phase::kBody) body_bytes += static_cast<double>(n);
    parser.feed(std::string_view(buf.data(), static_cast<size_t>(n)));
    last_byte = Clock::now();
  }
}

}  // namespace agentkv
