// A small blocking HTTP/1.1 client for benchmarks and tools: requests on a kept-alive connection (it
// reconnects when the server closed it), the body handed over piece by piece as it arrives
// (Content-Length, chunked or close-delimited), so SSE streams can be timed token by token.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "server/http_message.h"
#include "util/status.h"

namespace agentkv {

// "http://HOST:PORT" (an optional trailing path is kept as a prefix for request paths).
struct HttpUrl {
  std::string host;
  int port = 80;
  std::string base_path;  // "" or "/prefix" without a trailing slash
};
Result<HttpUrl> parse_http_url(std::string_view url);

class HttpClient {
 public:
  HttpClient(std::string host, int port, double timeout_s = 300);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request and reads the whole response; on_body receives the body in the pieces it
  // arrived in (a chunk of a chunked body, or what one read brought). Returns the status code. A
  // transport failure (refused, reset, timed out, malformed response) is an error, not a status.
  Result<int> request(std::string_view method, std::string_view path, const HttpHeaders& headers,
                      std::string_view body, const std::function<void(std::string_view)>& on_body);

 private:
  Status connect();
  void disconnect();
  Status read_more();  // appends at least one byte to buf_, or fails (EOF included)
  Result<std::string> read_line();

  std::string host_;
  int port_;
  double timeout_s_;
  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
};

// Splits a text/event-stream body into the payloads of its `data:` events.
class SseSplitter {
 public:
  // Calls on_data for every complete event's data (lines joined by '\n'); comments are skipped.
  void feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data);
  bool mid_event() const { return !pending_.empty(); }

 private:
  std::string pending_;
};

}  // namespace agentkv
