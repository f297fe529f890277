#include "server/http_parser.h"

#include <algorithm>
#include <limits>

namespace agentkv {
namespace {

// RFC 9110 tchar: the characters of methods, header names and Connection / Transfer-Encoding tokens.
bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The offending text for an error message: printable ASCII only, at most 40 characters.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 40) out += "...";
  return out;
}

// Calls fn for each trimmed, non-empty element of a comma-separated header value.
template <class Fn>
void for_each_list_item(std::string_view value, Fn&& fn) {
  while (true) {
    const size_t comma = value.find(',');
    const std::string_view item = trim_ows(value.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) return;
    value.remove_prefix(comma + 1);
  }
}

void split_target(HttpRequest& req) {
  std::string_view t = req.target;
  // absolute-form (proxies may send it): drop scheme and authority.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (t.size() >= scheme.size() && http_iequals(t.substr(0, scheme.size()), scheme)) {
      t.remove_prefix(scheme.size());
      const size_t slash = t.find_first_of("/?");
      t = slash == std::string_view::npos ? std::string_view() : t.substr(slash);
      break;
    }
  }
  const size_t q = t.find('?');
  const std::string_view path = t.substr(0, q);
  req.path = path.empty() ? std::string(1, '/') : std::string(path);
  if (q != std::string_view::npos) req.query = std::string(t.substr(q + 1));
}

}  // namespace

HttpParser::HttpParser(HttpLimits limits) : limits_(limits) {}

bool HttpParser::feed(std::string_view bytes) {
  if (failed()) return false;
  buf_.append(bytes);
  parse();
  return !failed();
}

std::optional<HttpRequest> HttpParser::next_request() {
  if (ready_.empty()) return std::nullopt;
  HttpRequest r = std::move(ready_.front());
  ready_.pop_front();
  return r;
}

bool HttpParser::mid_request() const {
  return !failed() && (have_request_line_ || state_ == State::kBody || buf_.size() > pos_);
}

bool HttpParser::take_continue_request() {
  if (!expect_continue_ || failed() || state_ != State::kBody) return false;
  expect_continue_ = false;
  return buf_.size() - pos_ < body_len_;
}

void HttpParser::fail(int status, std::string message) {
  if (failed()) return;
  error_.status = status;
  error_.message = std::move(message);
  buf_.clear();
  pos_ = scan_ = 0;
}

void HttpParser::parse() {
  while (!failed()) {
    if (state_ == State::kHead && !parse_head()) break;
    if (failed() || state_ != State::kBody) continue;
    if (buf_.size() - pos_ < body_len_) break;
    current_.body.assign(buf_, pos_, static_cast<size_t>(body_len_));
    pos_ += static_cast<size_t>(body_len_);
    ready_.push_back(std::move(current_));
    current_ = HttpRequest();
    state_ = State::kHead;
    have_request_line_ = false;
    head_bytes_ = 0;
    body_len_ = 0;
    expect_continue_ = false;
  }
  if (pos_ > 0 && !failed()) {
    buf_.erase(0, pos_);
    scan_ -= std::min(scan_, pos_);
    pos_ = 0;
  }
}

bool HttpParser::parse_head() {
  while (!failed()) {
    scan_ = std::max(scan_, pos_);
    const size_t nl = buf_.find('\n', scan_);
    if (nl == std::string::npos) {
      scan_ = buf_.size();
      if (head_bytes_ + (buf_.size() - pos_) > limits_.max_header_bytes) {
        fail(431, "request head exceeds " + std::to_string(limits_.max_header_bytes) + " bytes");
      }
      return false;
    }
    head_bytes_ += nl + 1 - pos_;
    if (head_bytes_ > limits_.max_header_bytes) {
      fail(431, "request head exceeds " + std::to_string(limits_.max_header_bytes) + " bytes");
      return false;
    }
    if (nl == pos_ || buf_[nl - 1] != '\r') {
      fail(400, "bare LF in request head (lines must end with CRLF)");
      return false;
    }
    const std::string_view line(buf_.data() + pos_, nl - 1 - pos_);
    pos_ = nl + 1;
    if (line.find('\r') != std::string_view::npos) {
      fail(400, "bare CR in request head");
      return false;
    }
    if (!have_request_line_) {
      if (line.empty()) continue;  // RFC 9112 2.2: ignore empty lines before a request line
      parse_request_line(line);
    } else if (line.empty()) {
      finish_head();
      return !failed();
    } else {
      parse_header_line(line);
    }
  }
  return false;
}

void HttpParser::parse_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line '" + shown(line) + "'");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "invalid method '" + shown(method) + "'");
  if (target.empty() ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return fail(400, "invalid request target '" + shown(target) + "'");
  }
  if (target[0] != '/' && !(target == "*" && method == "OPTIONS") &&
      !(target.size() > 7 && (http_iequals(target.substr(0, 7), "http://") ||
                              http_iequals(target.substr(0, 8), "https://")))) {
    return fail(400, "unsupported request target '" + shown(target) + "'");
  }
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !digit(version[5]) || version[6] != '.' ||
      !digit(version[7])) {
    return fail(400, "malformed HTTP version '" + shown(version) + "'");
  }
  if (version[5] != '1' || version[7] > '1') {
    return fail(505, "HTTP version " + std::string(version) + " is not supported (only HTTP/1.0 and HTTP/1.1)");
  }
  current_.method = std::string(method);
  current_.target = std::string(target);
  current_.version_minor = version[7] - '0';
  split_target(current_);
  have_request_line_ = true;
}

void HttpParser::parse_header_line(std::string_view line) {
  if (line[0] == ' ' || line[0] == '\t') return fail(400, "obsolete header line folding is not allowed");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "header line without ':' '" + shown(line) + "'");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name)) return fail(400, "invalid header name '" + shown(name) + "'");
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return fail(400, "invalid character in header '" + shown(name) + "'");
    }
  }
  if (current_.headers.size() >= limits_.max_headers) {
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " request headers");
  }
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  current_.headers.emplace_back(std::move(lower), std::string(value));
}

void HttpParser::finish_head() {
  HttpRequest& r = current_;
  int hosts = 0;
  int content_lengths = 0;
  std::optional<uint64_t> length;
  bool close = false, keep_alive = false;
  for (const auto& [name, value] : r.headers) {
    if (name == "host") {
      ++hosts;
    } else if (name == "transfer-encoding") {
      std::string bad;
      for_each_list_item(value, [&](std::string_view coding) {
        if (bad.empty() && !http_iequals(coding, "identity")) bad = shown(coding);
      });
      if (!bad.empty()) {
        return fail(501, "Transfer-Encoding '" + bad + "' is not supported (send a Content-Length body)");
      }
    } else if (name == "content-length") {
      if (++content_lengths > 1) return fail(400, "duplicate Content-Length header");
      if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return fail(400, "invalid Content-Length '" + shown(value) + "'");
      }
      // Saturate instead of overflowing: any value this large is over the limit anyway.
      uint64_t n = 0;
      for (char c : value) {
        const uint64_t d = static_cast<uint64_t>(c - '0');
        n = n > (std::numeric_limits<uint64_t>::max() - d) / 10 ? std::numeric_limits<uint64_t>::max() : n * 10 + d;
      }
      length = n;
    } else if (name == "connection") {
      for_each_list_item(value, [&](std::string_view token) {
        if (http_iequals(token, "close")) close = true;
        if (http_iequals(token, "keep-alive")) keep_alive = true;
      });
    } else if (name == "expect") {
      if (http_iequals(value, "100-continue")) expect_continue_ = true;
    }
  }
  if (hosts > 1) return fail(400, "duplicate Host header");
  if (hosts == 0 && r.version_minor == 1) return fail(400, "HTTP/1.1 request without a Host header");
  body_len_ = length.value_or(0);
  if (body_len_ > limits_.max_body_bytes) {
    return fail(413, "request body of " + std::to_string(body_len_) + " bytes exceeds the limit of " +
                         std::to_string(limits_.max_body_bytes) + " bytes");
  }
  r.keep_alive = !close && (r.version_minor == 1 || keep_alive);
  expect_continue_ = expect_continue_ && r.version_minor == 1 && body_len_ > 0;
  state_ = State::kBody;
}

}  // namespace agentkv
