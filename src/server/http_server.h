// A small threaded HTTP/1.1 server: one accept thread, one thread per connection (at most
// max_connections; beyond that a connection gets 503 and is closed). Handlers run on the connection
// thread and answer through HttpResponseWriter, either with one response or a stream (chunked for
// HTTP/1.1, close-delimited for 1.0). Transport only: routing and the OpenAI API live above it.
// Our own rather than a library's: Debian 12's cpp-httplib (0.11.4) predates fixes this server relies
// on: detecting a client that disconnects during a non-streamed request (so its generation is
// cancelled and its KV freed), a limit on the number of header fields, and rejecting the
// request-smuggling shapes (a repeated Content-Length, obs-fold line folding, a Transfer-Encoding it
// does not implement; tests/e2e/bad_requests.json sends the first two). The parser (server/http_parser.h) is fuzzed (fuzz/http_request_fuzz).
#pragma once

#include <atomic>
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
  // A client that only half-closes (shutdown(SHUT_WR)) after its request counts as gone too.
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
  State state_ = State::kNone;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponseWriter&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // IPv4 or IPv6 literal, or a name getaddrinfo resolves
  int port = 0;                    // 0: an ephemeral port; port() reports it
  int max_connections = 256;       // more concurrent connections get 503 and are closed
  double idle_timeout_s = 30;      // idle keep-alive connections and stalled partial requests are dropped
  double send_timeout_s = 30;      // a write that makes no progress this long fails
  double stop_timeout_s = 10;      // stop() waits this long for running handlers, then cuts their sockets
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
  // Stops accepting, closes idle connections, lets running handlers finish (up to stop_timeout_s; after
  // that their sockets are shut down so writes fail and client_gone() turns true), joins every thread.
  // Idempotent; must not be called from a handler.
  void stop();

  int port() const { return port_; }
  int active_connections() const { return active_.load(); }

 private:
  struct Connection {
    std::thread thread;
    int fd = -1;  // -1 once the connection thread closed it (guarded by mu_)
    bool done = false;
  };
  void accept_loop();
  void serve(Connection* conn, int fd);
  void serve_requests(int fd, bool& linger);
  void close_connection(Connection* conn, int fd, bool linger);
  void reject(int fd);
  void reap_finished();

  HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // written once by stop(); every poll() watches the read end
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::unique_ptr<Connection>> connections_;
};

}  // namespace agentkv
