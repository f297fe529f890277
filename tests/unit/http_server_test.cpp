#include "server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "server/api_server.h"
#include "util/json.h"

namespace agentkv {
namespace {

using namespace std::chrono_literals;

// A tiny blocking HTTP client: enough to send raw bytes and read back responses (Content-Length,
// chunked or close-delimited). Every read has a receive timeout so a broken server fails the test
// instead of hanging it.
class TestClient {
 public:
  // from: a loopback source address (127.0.0.2, ...) to act as another client for the per-client cap.
  explicit TestClient(int port, const char* from = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (from != nullptr) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      ::inet_pton(AF_INET, from, &src.sin_addr);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~TestClient() { close(); }
  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()); }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // The server sent something (or closed) within ms.
  bool readable(int ms) {
    if (pos_ < buf_.size()) return true;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }

  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // lowercased names
    std::string body;
    std::vector<std::string> chunks;
    std::string header(const std::string& n) const {
      auto it = headers.find(n);
      return it == headers.end() ? "" : it->second;
    }
  };

  // Reads one response; status 0 when the connection closed or timed out first.
  Response read_response() {
    Response r;
    std::string line;
    if (!read_line(line)) return r;
    if (line.size() < 12 || line.compare(0, 9, "HTTP/1.1 ") != 0) return r;
    const int status = std::stoi(line.substr(9, 3));
    while (read_line(line) && !line.empty()) {
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(colon + 2);
    }
    if (status < 200 || status == 204 || status == 304) {
      // no body
    } else if (r.headers.count("content-length")) {
      if (!read_exact(std::stoul(r.headers["content-length"]), r.body)) return r;
    } else if (r.header("transfer-encoding") == "chunked") {
      while (true) {
        if (!read_line(line)) return r;
        const size_t size = std::stoul(line, nullptr, 16);
        std::string chunk;
        if (!read_exact(size + 2, chunk)) return r;
        if (size == 0) break;
        chunk.resize(size);
        r.chunks.push_back(chunk);
        r.body += chunk;
      }
    } else {
      char c;
      while (read_byte(c)) r.body += c;
    }
    r.status = status;
    return r;
  }

  // The final response: interim 1xx ones (the half-close probe's 100 Continue) are skipped.
  Response read_final_response() {
    Response r = read_response();
    while (r.status >= 100 && r.status < 200) r = read_response();
    return r;
  }

  // True when the server closed the connection (EOF) before the receive timeout.
  bool closed_by_server() {
    char c;
    return !read_byte(c) && eof_;
  }

 private:
  bool read_byte(char& c) {
    if (pos_ == buf_.size()) {
      buf_.resize(4096);
      const ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), 0);
      eof_ = n == 0;
      if (n <= 0) {
        buf_.clear();
        pos_ = 0;
        return false;
      }
      buf_.resize(static_cast<size_t>(n));
      pos_ = 0;
    }
    c = buf_[pos_++];
    return true;
  }
  bool read_line(std::string& line) {
    line.clear();
    char c;
    while (read_byte(c)) {
      if (c == '\n') {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
      line += c;
    }
    return false;
  }
  bool read_exact(size_t n, std::string& out) {
    char c;
    while (out.size() < n && read_byte(c)) out += c;
    return out.size() == n;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
  size_t pos_ = 0;
};

int thread_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: test\r\n" + extra + "\r\n";
}

// Polls cond for up to 20 s: generous for a loaded machine, instant when things work.
template <class Fn>
bool eventually(Fn&& cond) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

HttpHandler echo_handler() {
  return [](const HttpRequest& req, HttpResponseWriter& w) {
    const std::string* agent = req.header("X-Agent");
    w.respond(200, "text/plain", req.method + " " + req.path + " q=" + req.query + " agent=" +
                                     (agent ? *agent : "-") + " body=" + req.body,
              {{"X-Echo", "1"}});
  };
}

// Answers "ok" and counts its calls: for tests that check a bad request never reaches the handler.
HttpHandler counting_handler(std::atomic<int>& calls) {
  return [&calls](const HttpRequest&, HttpResponseWriter& w) {
    ++calls;
    w.respond(200, "text/plain", "ok");
  };
}

TEST(HttpServer, AnswersOnAnEphemeralPortAndKeepsTheConnectionAlive) {
  HttpServer server;
  ASSERT_TRUE(server.start(echo_handler()).ok());
  ASSERT_GT(server.port(), 0);
  TestClient c(server.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send(get("/v1/models?x=1", "x-agent: a7\r\n")));
  auto r1 = c.read_response();
  EXPECT_EQ(r1.status, 200);
  EXPECT_EQ(r1.body, "GET /v1/models q=x=1 agent=a7 body=");
  EXPECT_EQ(r1.header("content-type"), "text/plain");
  EXPECT_EQ(r1.header("x-echo"), "1");
  EXPECT_FALSE(r1.header("date").empty());
  EXPECT_EQ(r1.header("connection"), "");
  // The same connection serves a second request.
  ASSERT_TRUE(c.send("POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"));
  auto r2 = c.read_response();
  EXPECT_EQ(r2.status, 200);
  EXPECT_EQ(r2.body, "POST /p q= agent=- body=hello");
}

TEST(HttpServer, AnswersPipelinedRequestsInOrder) {
  HttpServer server;
  ASSERT_TRUE(server.start(echo_handler()).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send(get("/one") + get("/two") + get("/three", "Connection: close\r\n")));
  EXPECT_EQ(c.read_response().body, "GET /one q= agent=- body=");
  EXPECT_EQ(c.read_response().body, "GET /two q= agent=- body=");
  auto r3 = c.read_response();
  EXPECT_EQ(r3.body, "GET /three q= agent=- body=");
  EXPECT_EQ(r3.header("connection"), "close");
  EXPECT_TRUE(c.closed_by_server());
}

TEST(HttpServer, ConnectionCloseAndHttp10CloseAfterTheResponse) {
  HttpServer server;
  ASSERT_TRUE(server.start(echo_handler()).ok());
  {
    TestClient c(server.port());
    ASSERT_TRUE(c.send(get("/", "Connection: close\r\n")));
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    TestClient c(server.port());
    ASSERT_TRUE(c.send("GET /old HTTP/1.0\r\n\r\n"));
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "GET /old q= agent=- body=");
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    TestClient c(server.port());
    ASSERT_TRUE(c.send("GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    auto r = c.read_response();
    EXPECT_EQ(r.header("connection"), "keep-alive");
    ASSERT_TRUE(c.send("GET /again HTTP/1.0\r\n\r\n"));
    EXPECT_EQ(c.read_response().body, "GET /again q= agent=- body=");
  }
}

TEST(HttpServer, StreamsChunkedFor11AndCloseDelimitedFor10) {
  HttpServer server;
  ASSERT_TRUE(server.start([](const HttpRequest&, HttpResponseWriter& w) {
    ASSERT_TRUE(w.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
    EXPECT_TRUE(w.write("data: one\n\n"));
    EXPECT_TRUE(w.write(""));  // an empty write must not end the stream
    EXPECT_TRUE(w.write("data: two\n\n"));
    EXPECT_TRUE(w.write(std::string(70000, 'z')));
    EXPECT_TRUE(w.end_stream());
    EXPECT_FALSE(w.write("late"));
  }).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send(get("/stream")));
  auto r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  ASSERT_EQ(r.chunks.size(), 3u);
  EXPECT_EQ(r.chunks[0], "data: one\n\n");
  EXPECT_EQ(r.chunks[1], "data: two\n\n");
  EXPECT_EQ(r.chunks[2].size(), 70000u);
  // Still usable after the stream.
  ASSERT_TRUE(c.send(get("/stream")));
  EXPECT_EQ(c.read_response().chunks.size(), 3u);

  TestClient old(server.port());
  ASSERT_TRUE(old.send("GET /stream HTTP/1.0\r\n\r\n"));
  auto r10 = old.read_response();
  EXPECT_EQ(r10.status, 200);
  EXPECT_EQ(r10.header("transfer-encoding"), "");
  EXPECT_EQ(r10.body, "data: one\n\ndata: two\n\n" + std::string(70000, 'z'));
}

TEST(HttpServer, ClientDisconnectDuringAStreamIsNoticed) {
  std::promise<std::pair<bool, bool>> outcome;  // (a write failed, client_gone())
  std::atomic<bool> started{false};
  HttpServer server;
  ASSERT_TRUE(server.start([&](const HttpRequest&, HttpResponseWriter& w) {
    w.start_stream(200, "text/event-stream");
    started = true;
    bool write_failed = false;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!w.write("data: token\n\n")) {
        write_failed = true;
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
    outcome.set_value({write_failed, w.client_gone()});
  }).ok());
  {
    TestClient c(server.port());
    ASSERT_TRUE(c.send(get("/stream")));
    ASSERT_TRUE(eventually([&] { return started.load(); }));
  }  // the client goes away mid-stream
  auto f = outcome.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  const auto [write_failed, gone] = f.get();
  EXPECT_TRUE(write_failed);
  EXPECT_TRUE(gone);
}

TEST(HttpServer, ClientGoneIsSeenWithoutWriting) {
  std::promise<bool> noticed;
  std::atomic<bool> started{false};
  HttpServer server;
  ASSERT_TRUE(server.start([&](const HttpRequest&, HttpResponseWriter& w) {
    EXPECT_FALSE(w.client_gone());
    started = true;
    noticed.set_value(eventually([&] { return w.client_gone(); }));
  }).ok());
  {
    TestClient c(server.port());
    ASSERT_TRUE(c.send(get("/slow")));
    ASSERT_TRUE(eventually([&] { return started.load(); }));
  }
  auto f = noticed.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.get());
}

TEST(HttpServer, HandlerWithoutResponseOrThrowingGets500AndTheServerLives) {
  HttpServer server;
  ASSERT_TRUE(server.start([](const HttpRequest& req, HttpResponseWriter& w) {
    if (req.path == "/throw") throw std::runtime_error("boom");
    if (req.path == "/badheader") {
      EXPECT_FALSE(w.respond(200, "text/plain", "x", {{"X-Bad", "a\r\nInjected: 1"}}));
      EXPECT_FALSE(w.respond(200, "text/plain", "x", {{"Content-Length", "1"}}));
    }
  }).ok());
  TestClient c(server.port());
  for (const char* path : {"/silent", "/throw", "/badheader"}) {
    ASSERT_TRUE(c.send(get(path)));
    auto r = c.read_response();
    EXPECT_EQ(r.status, 500) << path;
    auto j = parse_json(r.body);
    ASSERT_TRUE(j.ok()) << r.body;
    EXPECT_EQ(j->at("error").at("type").get<std::string>(), "server_error");
  }
}

TEST(HttpServer, MalformedRequestGetsJsonErrorAndClose) {
  HttpServer server;
  ASSERT_TRUE(server.start(echo_handler()).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
  auto r = c.read_response();
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("connection"), "close");
  auto j = parse_json(r.body);
  ASSERT_TRUE(j.ok()) << r.body;
  EXPECT_EQ(j->at("error").at("type").get<std::string>(), "invalid_request_error");
  EXPECT_TRUE(j->at("error").at("code").is_null());
  EXPECT_NE(j->at("error").at("message").get<std::string>().find("chunked"), std::string::npos);
  EXPECT_TRUE(c.closed_by_server());
}

TEST(HttpServer, OversizedBodyGets413BeforeItIsSent) {
  HttpServerOptions opts;
  opts.limits.max_body_bytes = 1024;
  HttpServer server(opts);
  std::atomic<int> calls{0};
  ASSERT_TRUE(server.start(counting_handler(calls)).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 4096\r\n\r\n" +
                     std::string(100, 'x')));
  auto r = c.read_response();
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("4096"), std::string::npos);
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(calls.load(), 0);
}

// Large bodies are read max_large_bodies at a time: beyond, the head alone gets 503 with Retry-After,
// before the body is sent; once the slot is free again the same request goes through. The first client
// asks for 100 Continue, which the server sends only once that connection holds the slot.
TEST(HttpServer, LargeBodiesAreReadAFewAtATime) {
  HttpServerOptions opts;
  opts.large_body_bytes = 100;
  opts.max_large_bodies = 1;
  HttpServer server(opts);
  ASSERT_TRUE(server.start(echo_handler()).ok());
  TestClient slow(server.port());
  ASSERT_TRUE(slow.send("POST /a HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n"));
  ASSERT_EQ(slow.read_response().status, 100);
  ASSERT_TRUE(slow.send(std::string(10, 'a')));
  TestClient probe(server.port());
  ASSERT_TRUE(probe.send("POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n"));
  auto refused = probe.read_response();
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("maximum of 1 request bodies over 100 bytes"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.header("retry-after"), "1");
  TestClient small(server.port());  // small bodies are not held back
  ASSERT_TRUE(small.send("POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\ndata"));
  EXPECT_EQ(small.read_response().status, 200);
  ASSERT_TRUE(slow.send(std::string(990, 'a')));
  EXPECT_EQ(slow.read_response().status, 200);
  // The slot comes back once the handler has returned, a moment after its response could be read.
  EXPECT_TRUE(eventually([&] { return server.large_bodies_held() == 0; }));
  TestClient again(server.port());
  ASSERT_TRUE(again.send("POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'c')));
  EXPECT_EQ(again.read_response().status, 200);
}

TEST(HttpServer, ExpectContinueGets100BeforeTheBody) {
  HttpServer server;
  ASSERT_TRUE(server.start(echo_handler()).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send("POST /up HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  EXPECT_EQ(c.read_response().status, 100);
  ASSERT_TRUE(c.send("data"));
  EXPECT_EQ(c.read_response().body, "POST /up q= agent=- body=data");
}

TEST(HttpServer, StalledPartialRequestIsDropped) {
  HttpServerOptions opts;
  opts.idle_timeout_s = 0.5;
  HttpServer server(opts);
  ASSERT_TRUE(server.start(echo_handler()).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: h\r\n"));  // never finished
  auto r = c.read_response();
  EXPECT_EQ(r.status, 408);
  EXPECT_TRUE(c.closed_by_server());
  // An idle keep-alive connection is closed silently.
  TestClient idle(server.port());
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_TRUE(eventually([&] { return server.active_connections() == 0; }));
}

TEST(HttpServer, RequestCutShortByAHalfCloseGets400) {
  HttpServer server;
  std::atomic<int> calls{0};
  ASSERT_TRUE(server.start(counting_handler(calls)).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n\r\n{\"short\":1}"));
  c.shutdown_write();
  auto r = c.read_response();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("before the request was complete"), std::string::npos) << r.body;
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(calls.load(), 0);
  // Half-closing between requests is not an error: the connection just ends.
  TestClient idle(server.port());
  idle.shutdown_write();
  EXPECT_TRUE(idle.closed_by_server());
}

TEST(HttpServer, OverMaxConnectionsGets503) {
  HttpServerOptions opts;
  opts.max_connections = 1;
  HttpServer server(opts);
  std::atomic<bool> entered{false}, release{false};
  ASSERT_TRUE(server.start([&](const HttpRequest&, HttpResponseWriter& w) {
    entered = true;
    eventually([&] { return release.load(); });
    w.respond(200, "text/plain", "first");
  }).ok());
  TestClient first(server.port());
  ASSERT_TRUE(first.send(get("/")));
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  TestClient second(server.port());
  ASSERT_TRUE(second.send(get("/")));
  auto r = second.read_response();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("connection limit"), std::string::npos);
  EXPECT_TRUE(second.closed_by_server());
  release = true;
  EXPECT_EQ(first.read_response().body, "first");
}

TEST(HttpServer, BindErrorNamesTheAddressAndTheReason) {
  HttpServer first;
  ASSERT_TRUE(first.start(echo_handler()).ok());
  HttpServerOptions opts;
  opts.port = first.port();
  HttpServer second(opts);
  Status st = second.start(echo_handler());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), "cannot bind 127.0.0.1:" + std::to_string(first.port()) + ": Address already in use");

  HttpServerOptions bad;
  bad.host = "not a host name";
  EXPECT_NE(HttpServer(bad).start(echo_handler()).error().find("cannot resolve host"), std::string::npos);
}

TEST(HttpServer, ListensOnIpv6Loopback) {
  HttpServerOptions opts;
  opts.host = "::1";
  HttpServer server(opts);
  Status st = server.start(echo_handler());
  if (!st.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << st.error();
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(server.port()));
  a.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string req = get("/six", "Connection: close\r\n");
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  std::string all;
  char buf[1024];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(all.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << all;
}

TEST(HttpServer, StopWaitsForARunningHandlerAndJoinsEveryThread) {
  // ThreadSanitizer's runtime starts a background thread of its own at the process's first thread
  // creation; create (and join) one first so that the count before already includes it.
  // A joined thread can still be listed in /proc/self/task for a moment after join() returns (the
  // kernel reaps it after waking the joiner), so both counts are read once they have settled.
  std::thread([] {}).join();
  int threads_before = thread_count();
  for (int settled = 0; settled < 10; std::this_thread::sleep_for(5ms)) {
    const int now = thread_count();
    settled = now == threads_before ? settled + 1 : 0;
    threads_before = now;
  }
  std::atomic<bool> entered{false}, finished{false};
  auto server = std::make_unique<HttpServer>();
  // Only /busy runs long: the idle client's own request must not be the one stop() waits for (it
  // was, when both slept: under load stop() could then come before the busy request was read).
  ASSERT_TRUE(server->start([&](const HttpRequest& req, HttpResponseWriter& w) {
    if (req.path != "/busy") {
      w.respond(200, "text/plain", "idle");
      return;
    }
    entered = true;
    std::this_thread::sleep_for(300ms);
    w.respond(200, "text/plain", "done");
    finished = true;
  }).ok());
  TestClient busy(server->port());
  TestClient idle(server->port());
  ASSERT_TRUE(idle.send(get("/")));
  ASSERT_EQ(idle.read_response().body, "idle");  // served, and now idles on keep-alive
  ASSERT_TRUE(busy.send(get("/busy")));
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  server->stop();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(server->active_connections(), 0);
  auto r = busy.read_response();
  EXPECT_EQ(r.body, "done");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(busy.closed_by_server());
  // New connections are refused once stopped.
  TestClient late(server->port());
  EXPECT_FALSE(late.connected());
  server->stop();  // idempotent
  server.reset();
  EXPECT_TRUE(eventually([&] { return thread_count() <= threads_before; }))
      << thread_count() << " threads, " << threads_before << " before the server started";
}

TEST(HttpServer, StopCutsAHandlerThatOutlivesTheDeadline) {
  HttpServerOptions opts;
  opts.drain_timeout_s = 0.2;
  HttpServer server(opts);
  std::atomic<bool> entered{false};
  std::atomic<bool> saw_gone{false};
  ASSERT_TRUE(server.start([&](const HttpRequest&, HttpResponseWriter& w) {
    entered = true;
    saw_gone = eventually([&] { return w.client_gone(); });  // a long generation that checks for cancel
  }).ok());
  TestClient c(server.port());
  ASSERT_TRUE(c.send(get("/")));
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  server.stop();
  EXPECT_TRUE(saw_gone.load());
}

// A client that sends its whole request and then shuts its write side (nc -N) is still reading: a
// handler that keeps checking client_gone() (as the mailbox does every 200 ms) answers it, plain or
// streamed. Only a full close or a reset is "gone" (ClientGoneIsSeenWithoutWriting).
TEST(HttpServer, HalfClosedClientGetsItsAnswerPlainOrStreamed) {
  std::atomic<int> saw_gone{0};
  HttpServer server;
  ASSERT_TRUE(server.start([&](const HttpRequest& req, HttpResponseWriter& w) {
    const auto until = std::chrono::steady_clock::now() + 600ms;
    const bool stream = req.path == "/stream";
    if (stream) w.start_stream(200, "text/event-stream");
    while (std::chrono::steady_clock::now() < until) {
      saw_gone += w.client_gone();
      if (stream) w.write("data: token\n\n");
      std::this_thread::sleep_for(20ms);
    }
    if (!stream) w.respond(200, "text/plain", "answer");
  }).ok());
  for (const std::string path : {"/plain", "/stream"}) {
    TestClient c(server.port());
    ASSERT_TRUE(c.send(get(path)));
    c.shutdown_write();
    auto r = c.read_final_response();
    EXPECT_EQ(r.status, 200) << path;
    if (path == "/plain") {
      EXPECT_EQ(r.body, "answer");
    } else {
      EXPECT_GE(r.chunks.size(), 5u);
    }
    EXPECT_TRUE(c.closed_by_server()) << path;
  }
  EXPECT_EQ(saw_gone.load(), 0);
}

// Slowloris: one byte every 100 ms keeps resetting an idle timer, but the head has its own deadline.
TEST(HttpServer, RequestHeadMustArriveWithinItsDeadline) {
  HttpServerOptions opts;
  opts.header_timeout_s = 0.5;
  HttpServer server(opts);
  std::atomic<int> calls{0};
  ASSERT_TRUE(server.start(counting_handler(calls)).ok());
  TestClient c(server.port());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nX-Slow: "));
  for (int i = 0; i < 100 && !c.readable(100); ++i) ASSERT_TRUE(c.send("a"));
  auto r = c.read_response();
  EXPECT_EQ(r.status, 408);
  EXPECT_NE(r.body.find("head did not arrive in time"), std::string::npos) << r.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(calls.load(), 0);
}

// A body must average body_min_rate once its grace has passed; a fast one is unaffected.
TEST(HttpServer, RequestBodyMustArriveAtAMinimumRate) {
  HttpServerOptions opts;
  opts.body_min_rate = 1000;
  opts.body_grace_s = 0.5;
  HttpServer server(opts);
  ASSERT_TRUE(server.start(echo_handler()).ok());
  TestClient c(server.port());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n"));
  for (int i = 0; i < 100 && !c.readable(100); ++i) ASSERT_TRUE(c.send(std::string(10, 'x')));  // 100 B/s
  auto r = c.read_response();
  EXPECT_EQ(r.status, 408);
  EXPECT_NE(r.body.find("body arrived too slowly"), std::string::npos) << r.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);

  TestClient fast(server.port());
  ASSERT_TRUE(fast.send("POST /f HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'y')));
  EXPECT_EQ(fast.read_response().status, 200);
}

// At the cap, idle keep-alive connections (the longest idle first) make room, then unfinished requests
// (answered 503); only connections running a handler keep a newcomer out.
TEST(HttpServer, IdleThenUnfinishedConnectionsMakeRoomAtTheCap) {
  HttpServerOptions opts;
  opts.max_connections = 3;
  HttpServer server(opts);
  ASSERT_TRUE(server.start(echo_handler()).ok());
  std::vector<std::unique_ptr<TestClient>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<TestClient>(server.port()));
    ASSERT_TRUE(idle.back()->send(get("/warm")));
    ASSERT_EQ(idle.back()->read_response().status, 200);  // then idles on keep-alive
    // The response can arrive before its connection counts as idle; "the longest idle" is only defined
    // once the previous one does.
    ASSERT_TRUE(eventually([&] { return server.idle_connections() == i + 1; }));
  }
  TestClient newcomer(server.port());
  ASSERT_TRUE(newcomer.send(get("/new")));
  EXPECT_EQ(newcomer.read_response().status, 200);
  EXPECT_TRUE(idle[0]->closed_by_server());  // the longest idle went
  EXPECT_FALSE(idle[1]->readable(100));

  // Slowloris heads: three unfinished requests fill the cap; a newcomer still gets in.
  std::vector<std::unique_ptr<TestClient>> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(std::make_unique<TestClient>(server.port()));
    ASSERT_TRUE(slow.back()->send("GET / HTTP/1.1\r\nX-Slow: "));
  }
  std::this_thread::sleep_for(300ms);  // their bytes are read: a connection that sent none is closed silently
  TestClient second(server.port());
  ASSERT_TRUE(second.send(get("/second")));
  EXPECT_EQ(second.read_response().status, 200);
  bool a_slow_one_got_503 = false;
  for (auto& c : slow)
    if (c->readable(1000)) a_slow_one_got_503 = a_slow_one_got_503 || c->read_response().status == 503;
  EXPECT_TRUE(a_slow_one_got_503);
}

// One address may hold max_connections_per_client; more get 429 unless one of its own is idle, and
// another address is not affected.
TEST(HttpServer, ConnectionsPerClientAddressAreCapped) {
  HttpServerOptions opts;
  opts.max_connections_per_client = 2;
  HttpServer server(opts);
  std::atomic<int> entered{0};
  std::atomic<bool> release{false};
  ASSERT_TRUE(server.start([&](const HttpRequest& req, HttpResponseWriter& w) {
    if (req.path == "/hold") {
      ++entered;
      eventually([&] { return release.load(); });
    }
    w.respond(200, "text/plain", "ok");
  }).ok());
  TestClient a(server.port()), b(server.port());
  ASSERT_TRUE(a.send(get("/hold")));
  ASSERT_TRUE(b.send(get("/hold")));
  ASSERT_TRUE(eventually([&] { return entered.load() == 2; }));
  TestClient third(server.port());
  ASSERT_TRUE(third.send(get("/")));
  auto r = third.read_response();
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.body.find("too many connections from 127.0.0.1"), std::string::npos) << r.body;
  TestClient other(server.port(), "127.0.0.2");
  ASSERT_TRUE(other.connected());
  ASSERT_TRUE(other.send(get("/")));
  EXPECT_EQ(other.read_response().status, 200);
  release = true;
  EXPECT_EQ(a.read_response().status, 200);
  EXPECT_EQ(b.read_response().status, 200);
  // Both of 127.0.0.1's connections are idle now: a third one takes the place of one of them.
  TestClient fourth(server.port());
  ASSERT_TRUE(fourth.send(get("/")));
  EXPECT_EQ(fourth.read_response().status, 200);
}

// stop() drains: a running handler finishes, while a new connection is answered 503 until it does.
TEST(HttpServer, DrainAnswersNewRequests503WhileRunningOnesFinish) {
  HttpServerOptions opts;
  opts.drain_timeout_s = 20;
  HttpServer server(opts);
  std::atomic<bool> entered{false}, release{false};
  ASSERT_TRUE(server.start([&](const HttpRequest&, HttpResponseWriter& w) {
    entered = true;
    eventually([&] { return release.load(); });
    w.respond(200, "text/plain", "finished");
  }).ok());
  TestClient busy(server.port());
  ASSERT_TRUE(busy.send(get("/")));
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  std::thread stopper([&] { server.stop(); });
  std::this_thread::sleep_for(200ms);
  TestClient late(server.port());
  ASSERT_TRUE(late.connected());
  ASSERT_TRUE(late.send(get("/")));
  auto r = late.read_response();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("shutting down"), std::string::npos) << r.body;
  release = true;
  stopper.join();
  EXPECT_EQ(busy.read_response().body, "finished");
}

TEST(ApiAuth, BearerSchemeIsCaseInsensitiveAndOneHeaderOnly) {
  HttpRequest req;
  EXPECT_FALSE(bearer_token(req)->has_value());
  for (const char* value : {"Bearer k1", "bearer k1", "BEARER   k1"}) {
    req.headers = {{"authorization", value}};
    auto t = bearer_token(req);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->value_or("-"), "k1") << value;
  }
  req.headers = {{"authorization", "Basic k1"}};
  EXPECT_FALSE(bearer_token(req)->has_value());
  req.headers = {{"authorization", "Bearer k1"}, {"authorization", "Bearer k2"}};
  auto two = bearer_token(req);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().find("two Authorization headers"), std::string::npos);
}

}  // namespace
}  // namespace agentkv
