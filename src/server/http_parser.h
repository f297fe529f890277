// Incremental HTTP/1.1 request parser. Bytes may arrive split anywhere, and one read may hold several
// pipelined requests; complete requests queue up in arrival order. Strict by design (RFC 9112): lines
// end in CRLF, no obs-fold, Content-Length bodies only. After the first error the parser stops; the
// requests completed before it are still returned, then the caller answers error() and closes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace agentkv {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;       // request line + headers, line ends included
  size_t max_headers = 64;                   // header lines per request
  size_t max_body_bytes = 8 * 1024 * 1024;   // Content-Length above this is refused before reading
};

// A protocol error: the status to answer (400, 413, 431, 501, 505) and a one-line message.
struct HttpError {
  int status = 0;
  std::string message;
};

class HttpParser {
 public:
  explicit HttpParser(HttpLimits limits = {});

  // Appends bytes and parses as far as they go. Returns false once the input is in error.
  bool feed(std::string_view bytes);
  // The oldest complete request not yet taken, or nullopt.
  std::optional<HttpRequest> next_request();

  bool failed() const { return error_.status != 0; }
  const HttpError& error() const { return error_; }
  // Bytes of an unfinished request are buffered (a stalled client, as opposed to an idle one).
  bool mid_request() const;
  // The head of the request in progress is complete and its body is still arriving.
  bool in_body() const { return !failed() && state_ == State::kBody; }
  // The Content-Length of that request (while in_body()).
  uint64_t body_length() const { return body_len_; }
  // True once per request whose head asked "Expect: 100-continue" and whose body is still pending;
  // the server then sends "100 Continue" (curl waits a second for it before sending large bodies).
  bool take_continue_request();

 private:
  enum class State { kHead, kBody };
  void parse();
  bool parse_head();  // false: needs more bytes (or failed)
  void parse_request_line(std::string_view line);
  void parse_header_line(std::string_view line);
  void finish_head();
  void fail(int status, std::string message);

  HttpLimits limits_;
  std::string buf_;
  size_t pos_ = 0;        // start of unparsed bytes in buf_
  size_t scan_ = 0;       // where the search for the next '\n' resumes (>= pos_)
  State state_ = State::kHead;
  bool have_request_line_ = false;
  size_t head_bytes_ = 0;
  uint64_t body_len_ = 0;
  bool expect_continue_ = false;
  HttpRequest current_;
  std::deque<HttpRequest> ready_;
  HttpError error_;
};

}  // namespace agentkv
