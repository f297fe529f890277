// A small threaded HTTP/1.1 server: one accept thread, one thread per connection. Handlers run on the
// connection thread and answer through HttpResponseWriter, either with one response or a stream
// (chunked for HTTP/1.1, close-delimited for 1.0). Transport only: routing and the OpenAI API live above it.
// Hostile clients cannot hold the slots (issue 21): a request head must arrive within a deadline and a
// body at a minimum average rate (an idle timer that every byte resets is not enough against slowloris);
// at the connection cap, or a client address's cap, the connection that waits longest without running
// a handler is closed first (idle keep-alive ones before unfinished requests), and only when none can go
// does the newcomer get 503 (429 for its address's cap). stop() drains: running handlers may finish up
// to drain_timeout_s while new connections and requests get 503.
// Our own rather than a library's: Debian 12's cpp-httplib (0.11.4) predates fixes this server relies
// on: detecting a client that disconnects during a non-streamed request (so its generation is
// cancelled and its KV freed), a limit on the number of header fields, and rejecting the
// request-smuggling shapes (a repeated Content-Length, obs-fold line folding, a Transfer-Encoding it
// does not implement; tests/e2e/bad_requests.json sends the first two). The parser (server/http_parser.h) is fuzzed (fuzz/http_request_fuzz).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/http_message.h"
#include "server/http_parser.h"
#include "util/status.h"

namespace agentkv {

// Writes one response on a connection. Every call returns false once the client is gone or a write
// failed or timed out; the handler can then stop working on the request.
class HttpResponseWriter {
 public:
  // Made by the server for each request; head_request drops bodies as HEAD requires.
  HttpResponseWriter(int fd, int version_minor, bool keep_alive, bool head_request,
                     const std::atomic<bool>* stopping = nullptr);

  // A complete response: adds Content-Length, Date and Connection. extra_headers must not set
  // Content-Length, Transfer-Encoding or Date, and hold no CR/LF; "Connection: close" is honoured.
  // Returns false (and sends nothing) for such headers, or when a response was already started.
  bool respond(int status, std::string_view content_type, std::string_view body,
               const HttpHeaders& extra_headers = {});
  // Starts a streamed response; write() sends one chunk each, end_stream() finishes it.
  bool start_stream(int status, std::string_view content_type, const HttpHeaders& extra_headers = {});
  bool write(std::string_view data);
  bool end_stream();
  // Non-blocking: has the peer closed or reset the connection (even while nothing is written)?
  // A client that only half-closes (shutdown(SHUT_WR), as `nc -N` does) after its request is still
  // there and gets its answer. The server cannot tell that EOF from a full close, so on the first EOF
  // before an HTTP/1.1 response has started it sends an interim "100 Continue" (clients must accept
  // 1xx, RFC 9110 15.2): a peer that fully closed answers it with a reset, which the next call sees.
  bool client_gone();

  bool started() const { return state_ != State::kNone; }
  bool streaming() const { return state_ == State::kStreaming; }
  bool failed() const { return broken_; }
  // Whether the connection may carry another request after this response.
  bool keep_alive() const { return keep_alive_ && !broken_; }

 private:
  enum class State { kNone, kStreaming, kDone };
  bool send_head(int status, std::string_view content_type, const HttpHeaders& extra, std::string_view framing);
  bool send_all(std::string_view data);

  int fd_;
  bool http11_;
  bool keep_alive_;
  bool head_request_;
  const std::atomic<bool>* stopping_;
  bool chunked_ = false;
  bool broken_ = false;
  bool probed_ = false;  // the "100 Continue" probe after an EOF was sent
  State state_ = State::kNone;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponseWriter&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // IPv4 or IPv6 literal, or a name getaddrinfo resolves
  int port = 0;                    // 0: an ephemeral port; port() reports it
  int max_connections = 256;       // at the cap an idle or unfinished connection is closed, or the new one gets 503
  // The same per client address (429 when none of its own can go): half the cap, so one address never
  // holds every slot. Behind a proxy every client shares its address: raise it to max_connections there.
  int max_connections_per_client = 128;
  double idle_timeout_s = 30;      // a keep-alive connection waits this long for a request's first byte; and
                                   // a request is dropped (408) after this long without a byte
  double header_timeout_s = 10;    // the request line and headers must be complete this long after the connect
                                   // (or, on a kept-alive connection, their first byte)
  double body_min_rate = 1024;     // bytes/s: a body must average at least this (0: no rate), ...
  double body_grace_s = 10;        // ... enforced once this long has passed since its head arrived
  double send_timeout_s = 30;      // a write that makes no progress this long fails
  double drain_timeout_s = 30;     // stop() waits this long for running handlers, then cuts their sockets
  // Bodies over large_body_bytes are read and handled max_large_bodies at a time over all connections:
  // beyond, a request gets 503 (Retry-After) as soon as its head declares such a body, before any of it
  // is buffered, so memory for bodies is bounded by this, not by max_connections x max_body_bytes.
  size_t large_body_bytes = size_t(64) << 10;
  int max_large_bodies = 4;
  HttpLimits limits;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options = {});
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the accept thread. Error e.g. "cannot bind 127.0.0.1:8080: Address already in use".
  Status start(HttpHandler handler);
  // Drains: closes idle connections, answers new connections and new requests 503, lets running
  // handlers finish (up to drain_timeout_s; after that their sockets are shut down so writes fail and
  // client_gone() turns true), then stops accepting and joins every thread. Idempotent; must not be
  // called from a handler.
  void stop();

  int port() const { return port_; }
  int active_connections() const { return active_.load(); }
  // Connections holding a large-body slot; a slot is given back after its handler returned, which is
  // just after the client could read the response.
  int large_bodies_held() const { return large_bodies_.load(); }
  // Keep-alive connections waiting for their next request (the first to go at the cap). A response can
  // reach its client just before its connection counts here.
  int idle_connections() const;

 private:
  // What a connection is doing, in the order in which connections are closed at a cap. A new connection
  // is in kHead from the start (its head's deadline runs from the connect), so a fresh client is never
  // taken for an idle keep-alive one.
  enum class Phase { kIdle, kHead, kBody, kHandler };
  struct Connection {
    std::thread thread;
    std::string client;  // the peer's address, for the per-client cap
    // Guarded by mu_.
    int fd = -1;  // -1 once the connection thread closed it
    Phase phase = Phase::kHead;
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();  // of the phase
    bool evicted = false;  // closed to make room: the thread answers 503 (or nothing when idle) and ends
    bool done = false;
  };
  void accept_loop();
  // Under mu_: whether a connection from `client` may be served now, closing an idle or unfinished one
  // if that makes room; otherwise the status and message of the refusal.
  bool admit(const std::string& client, int& status, std::string& message);
  bool evict_one(const std::string* client);
  // The connection thread moves to a phase; false once the connection was evicted.
  bool enter(Connection* conn, Phase phase);
  void serve(Connection* conn, int fd);
  void serve_requests(Connection* conn, int fd, bool& linger);
  void close_connection(Connection* conn, int fd, bool linger);
  void reap_finished();

  HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // written once by stop(); every poll() watches the read end
  int port_ = 0;
  std::atomic<bool> stopping_{false};       // draining: new connections and requests get 503
  std::atomic<bool> stop_accepting_{false};  // the drain is over: the accept thread ends
  std::atomic<int> active_{0};
  std::atomic<int> large_bodies_{0};         // connections holding a large-body slot (see HttpServerOptions)
  int evicting_ = 0;  // connections evicted whose threads have not closed them yet (guarded by mu_)
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::unique_ptr<Connection>> connections_;
};

}  // namespace agentkv
