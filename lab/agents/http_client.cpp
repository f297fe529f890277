#include "http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

namespace agentkv {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <class Int>
bool parse_number(std::string_view s, Int* out, int base = 10) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

Result<HttpUrl> parse_http_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) return make_error("URL '" + std::string(url) + "' must start with http://");
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    out.base_path = std::string(path);
  }
  // [v6]:port, host:port or host.
  size_t colon = std::string_view::npos;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return make_error("URL '" + std::string(url) + "': unclosed [");
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return make_error("URL '" + std::string(url) + "': junk after ]");
      colon = close + 1;
    }
  } else {
    colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
  }
  if (colon != std::string_view::npos && !parse_number(authority.substr(colon + 1), &out.port))
    return make_error("URL '" + std::string(url) + "': bad port");
  if (out.host.empty() || out.port < 1 || out.port > 65535) return make_error("URL '" + std::string(url) + "': bad host or port");
  return out;
}

HttpClient::HttpClient(std::string host, int port, double timeout_s)
    : host_(std::move(host)), port_(port), timeout_s_(timeout_s) {}

HttpClient::~HttpClient() { disconnect(); }

void HttpClient::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buf_.clear();
  eof_ = false;
}

Status HttpClient::connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string service = std::to_string(port_);
  if (int rc = ::getaddrinfo(host_.c_str(), service.c_str(), &hints, &addrs); rc != 0)
    return make_error("cannot resolve '" + host_ + "': " + gai_strerror(rc));
  std::string err = "no address";
  for (addrinfo* a = addrs; a != nullptr && fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      fd_ = fd;
    } else {
      err = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(addrs);
  if (fd_ < 0) return make_error("cannot connect to " + host_ + ":" + service + ": " + err);
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {};
}

Status HttpClient::read_more() {
  pollfd p{fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, int(timeout_s_ * 1000));
  if (ready == 0) return make_error("timed out after " + std::to_string(timeout_s_) + " s waiting for the server");
  if (ready < 0) return make_error(std::string("poll: ") + std::strerror(errno));
  char tmp[16384];
  ssize_t n;
  do {
    n = ::recv(fd_, tmp, sizeof tmp, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return make_error(std::string("recv: ") + std::strerror(errno));
  if (n == 0) {
    eof_ = true;
    return make_error("the server closed the connection");
  }
  buf_.append(tmp, size_t(n));
  return {};
}

Result<std::string> HttpClient::read_line() {
  size_t nl;
  while ((nl = buf_.find("\r\n")) == std::string::npos) {
    if (buf_.size() > 64 * 1024) return make_error("response line longer than 64 KiB");
    AGENTKV_TRY(read_more());
  }
  std::string line = buf_.substr(0, nl);
  buf_.erase(0, nl + 2);
  return line;
}

Result<int> HttpClient::request(std::string_view method, std::string_view path, const HttpHeaders& headers,
                                std::string_view body, const std::function<void(std::string_view)>& on_body) {
  // A kept-alive connection the server closed meanwhile shows up as EOF on the first read; only
  // then is the request resent on a new connection (nothing of it was processed).
  auto fail = [this](const std::string& msg) -> Error {
    disconnect();  // the connection is in an unknown state
    return make_error(msg);
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = fd_ >= 0;
    if (!reused) AGENTKV_TRY(connect());
    std::string head = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: " + host_ + "\r\n";
    for (const auto& [k, v] : headers) head += k + ": " + v + "\r\n";
    if (!body.empty() || method == "POST") head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    head += "\r\n";
    head.append(body);
    std::string_view rest = head;
    bool send_failed = false;
    while (!rest.empty()) {
      const ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        send_failed = true;
        break;
      }
      rest.remove_prefix(size_t(n));
    }
    auto status_line = send_failed ? Result<std::string>(make_error("send failed")) : read_line();
    if (!status_line.ok()) {
      const bool stale = reused && (send_failed || (eof_ && buf_.empty()));
      disconnect();
      if (stale) continue;
      return make_error(status_line.error());
    }
    // "HTTP/1.1 200 OK"
    const std::string& sl = *status_line;
    int status = 0;
    if (sl.size() < 12 || sl.compare(0, 7, "HTTP/1.") != 0 || !parse_number(std::string_view(sl).substr(9, 3), &status))
      return fail("malformed status line '" + sl.substr(0, 60) + "'");
    bool chunked = false, close = sl.compare(0, 8, "HTTP/1.0") == 0;
    std::optional<size_t> length;
    for (;;) {
      auto line = read_line();
      if (!line.ok()) return fail(line.error());
      if (line->empty()) break;
      const size_t colon = line->find(':');
      if (colon == std::string::npos) return fail("malformed header line");
      const std::string name = lower(std::string_view(*line).substr(0, colon));
      const std::string value = lower(trim(std::string_view(*line).substr(colon + 1)));
      if (name == "transfer-encoding") chunked = value.find("chunked") != std::string::npos;
      if (name == "connection") close = value.find("close") != std::string::npos;
      if (name == "content-length") {
        size_t n = 0;
        if (!parse_number(std::string_view(value), &n)) return fail("bad Content-Length");
        length = n;
      }
    }
    const bool bodiless = status < 200 || status == 204 || status == 304 || method == "HEAD";
    if (bodiless) {
      // nothing follows the head
    } else if (chunked) {
      for (;;) {
        auto size_line = read_line();
        if (!size_line.ok()) return fail(size_line.error());
        std::string_view hex = *size_line;
        hex = hex.substr(0, hex.find(';'));
        size_t size = 0;
        if (!parse_number(trim(hex), &size, 16)) return fail("bad chunk size");
        if (size == 0) {
          for (;;) {  // trailers, then the empty line
            auto t = read_line();
            if (!t.ok()) return fail(t.error());
            if (t->empty()) break;
          }
          break;
        }
        while (buf_.size() < size + 2) {
          if (Status st = read_more(); !st.ok()) return fail(st.error());
        }
        on_body(std::string_view(buf_).substr(0, size));
        buf_.erase(0, size + 2);
      }
    } else if (length) {
      size_t left = *length;
      while (left > 0) {
        if (buf_.empty())
          if (Status st = read_more(); !st.ok()) return fail(st.error());
        const size_t take = std::min(left, buf_.size());
        on_body(std::string_view(buf_).substr(0, take));
        buf_.erase(0, take);
        left -= take;
      }
    } else {
      close = true;  // delimited by the close
      for (;;) {
        if (!buf_.empty()) on_body(buf_);
        buf_.clear();
        if (Status st = read_more(); !st.ok()) {
          if (!eof_) return fail(st.error());
          break;
        }
      }
    }
    if (close) disconnect();
    return status;
  }
  return make_error("the server closed the connection twice");
}

void SseSplitter::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data) {
  pending_.append(bytes);
  size_t start = 0;
  for (;;) {
    const size_t end = pending_.find("\n\n", start);
    if (end == std::string::npos) break;
    std::string data;
    std::string_view event(pending_.data() + start, end - start);
    bool any = false;
    while (!event.empty()) {
      const size_t nl = event.find('\n');
      const std::string_view line = event.substr(0, nl);
      event.remove_prefix(nl == std::string_view::npos ? event.size() : nl + 1);
      if (line.substr(0, 5) != "data:") continue;
      std::string_view v = line.substr(5);
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (any) data += '\n';
      data.append(v);
      any = true;
    }
    if (any) on_data(data);
    start = end + 2;
  }
  pending_.erase(0, start);
}

}  // namespace agentkv
