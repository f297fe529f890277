#include "server/http_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv {
namespace {

std::vector<HttpRequest> drain(HttpParser& p) {
  std::vector<HttpRequest> out;
  while (auto r = p.next_request()) out.push_back(std::move(*r));
  return out;
}

// Feeds text in one piece and expects the parser to fail with this status.
HttpError http_parse_error(const std::string& text, HttpLimits limits = {}) {
  HttpParser p(limits);
  EXPECT_FALSE(p.feed(text)) << text;
  EXPECT_TRUE(p.failed());
  EXPECT_TRUE(drain(p).empty());
  return p.error();
}

TEST(HttpParser, ParsesGetWithQueryAndCaseInsensitiveHeaders) {
  HttpParser p;
  ASSERT_TRUE(p.feed("GET /v1/models?limit=2&x=%20 HTTP/1.1\r\nHost: localhost\r\nX-Custom-Thing:  a b \t\r\n\r\n"));
  auto reqs = drain(p);
  ASSERT_EQ(reqs.size(), 1u);
  const HttpRequest& r = reqs[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/v1/models?limit=2&x=%20");
  EXPECT_EQ(r.path, "/v1/models");
  EXPECT_EQ(r.query, "limit=2&x=%20");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_TRUE(r.body.empty());
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[1].first, "x-custom-thing");
  ASSERT_NE(r.header("X-CUSTOM-THING"), nullptr);
  EXPECT_EQ(*r.header("x-custom-thing"), "a b");
  EXPECT_EQ(r.header("missing"), nullptr);
  EXPECT_FALSE(p.mid_request());
}

TEST(HttpParser, ParsesPostBodyFedByteByByte) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi\r\n"}]})";
  const std::string text = "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                           "content-length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  HttpParser p;
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(p.feed(text.substr(i, 1))) << p.error().message;
    if (i + 1 < text.size()) {
      EXPECT_FALSE(p.next_request().has_value()) << i;
      EXPECT_TRUE(p.mid_request());
    }
  }
  auto reqs = drain(p);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].body, body);
  EXPECT_FALSE(p.mid_request());
}

TEST(HttpParser, SplitsPipelinedRequestsAndKeepsThoseBeforeAnError) {
  const std::string one = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
  const std::string two = "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  HttpParser p;
  ASSERT_TRUE(p.feed(one + two + one.substr(0, 20)));
  auto reqs = drain(p);
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].body, "abc");
  EXPECT_EQ(reqs[1].path, "/b");
  EXPECT_FALSE(reqs[1].keep_alive);
  EXPECT_TRUE(p.mid_request());
  ASSERT_TRUE(p.feed(one.substr(20)));
  ASSERT_EQ(drain(p).size(), 1u);

  EXPECT_FALSE(p.feed(one + "BAD LINE\r\n\r\n"));
  EXPECT_EQ(drain(p).size(), 1u);  // the complete request before the error still comes out
  EXPECT_EQ(p.error().status, 400);
}

TEST(HttpParser, KeepAliveDefaultsFollowTheVersion) {
  struct Case {
    const char* text;
    bool keep_alive;
  } cases[] = {
      {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false},
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
  };
  for (const Case& c : cases) {
    HttpParser p;
    ASSERT_TRUE(p.feed(c.text)) << c.text << p.error().message;
    auto reqs = drain(p);
    ASSERT_EQ(reqs.size(), 1u) << c.text;
    EXPECT_EQ(reqs[0].keep_alive, c.keep_alive) << c.text;
  }
}

TEST(HttpParser, AcceptsAbsoluteFormAndLeadingEmptyLines) {
  HttpParser p;
  ASSERT_TRUE(p.feed("\r\nGET http://example.com:8080/x/y?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"));
  auto reqs = drain(p);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/x/y");
  EXPECT_EQ(reqs[0].query, "q=1");
}

TEST(HttpParser, ExpectContinueIsReportedOnceWhileTheBodyIsPending) {
  HttpParser p;
  ASSERT_TRUE(p.feed("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"));
  EXPECT_TRUE(p.take_continue_request());
  EXPECT_FALSE(p.take_continue_request());
  ASSERT_TRUE(p.feed("ok"));
  EXPECT_EQ(drain(p).size(), 1u);
}

TEST(HttpParser, MalformedInputIs400WithAMessageNamingTheProblem) {
  struct Case {
    std::string text;
    const char* needle;
  } cases[] = {
      {"GET /\r\n\r\n", "malformed request line"},
      {"GET  / HTTP/1.1\r\nHost: h\r\n\r\n", "malformed request line"},
      {"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", "invalid method"},
      {"GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n", "invalid request target"},
      {"GET abc HTTP/1.1\r\nHost: h\r\n\r\n", "unsupported request target"},
      {"GET / HTTX/1.1\r\nHost: h\r\n\r\n", "malformed HTTP version"},
      {"GET / HTTP/1.1\nHost: h\r\n\r\n", "bare LF"},
      {"GET / HTTP/1.1\r\nHost: h\rx\r\n\r\n", "bare CR"},
      {"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", "without ':'"},
      {"GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n", "invalid header name"},
      {"GET / HTTP/1.1\r\nHost : h\r\n\r\n", "invalid header name"},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: a\x7fz\r\n\r\n", "invalid character"},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n  folded\r\n\r\n", "folding"},
      {"GET / HTTP/1.1\r\n\r\n", "without a Host"},
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "duplicate Host"},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", "invalid Content-Length"},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n", "invalid Content-Length"},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc", "invalid Content-Length"},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "duplicate Content-Length"},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc", "duplicate Content-Length"},
  };
  for (const Case& c : cases) {
    const std::string& text = c.text;
    const HttpError e = http_parse_error(text);
    EXPECT_EQ(e.status, 400) << text;
    EXPECT_NE(e.message.find(c.needle), std::string::npos) << text << " -> " << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos);
  }
}

TEST(HttpParser, NulInsideAHeaderValueIsRejected) {
  const std::string text("GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 34);
  EXPECT_EQ(http_parse_error(text).status, 400);
}

TEST(HttpParser, BodyOverTheLimitIs413BeforeTheBodyArrives) {
  HttpLimits limits;
  limits.max_body_bytes = 100;
  HttpParser p(limits);
  EXPECT_FALSE(p.feed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 101\r\n\r\n"));
  EXPECT_EQ(p.error().status, 413);
  EXPECT_NE(p.error().message.find("101"), std::string::npos);
  EXPECT_EQ(http_parse_error("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999999\r\n\r\n")
                .status,
            413);
  HttpParser ok(limits);
  EXPECT_TRUE(ok.feed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x')));
  EXPECT_EQ(drain(ok).size(), 1u);
}

TEST(HttpParser, HeadersTooLargeOrTooManyAre431) {
  HttpLimits limits;
  limits.max_header_bytes = 256;
  limits.max_headers = 4;
  // Too large while still incomplete: no need to wait for the end of the head.
  HttpParser p(limits);
  EXPECT_FALSE(p.feed("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(300, 'a')));
  EXPECT_EQ(p.error().status, 431);
  EXPECT_EQ(http_parse_error("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(300, 'a') + "\r\n\r\n", limits).status,
            431);
  EXPECT_EQ(http_parse_error("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits).status, 431);
  // An endless stream of empty lines counts against the head limit too.
  EXPECT_EQ(http_parse_error(std::string(300, '\r').replace(0, 300, std::string(150, '\r') + std::string(150, '\n')),
                        limits)
                .status,
            400);
  std::string blank;
  for (int i = 0; i < 200; ++i) blank += "\r\n";
  EXPECT_EQ(http_parse_error(blank, limits).status, 431);
}

TEST(HttpParser, TransferEncodingOtherThanIdentityIs501) {
  EXPECT_EQ(http_parse_error("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").status, 501);
  EXPECT_EQ(http_parse_error("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n"
                        "Content-Length: 3\r\n\r\nabc").status,
            501);
  HttpParser p;
  EXPECT_TRUE(p.feed("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\nz"));
  EXPECT_EQ(drain(p).size(), 1u);
}

TEST(HttpParser, VersionsOtherThan10And11Are505) {
  EXPECT_EQ(http_parse_error("GET / HTTP/2.0\r\nHost: h\r\n\r\n").status, 505);
  EXPECT_EQ(http_parse_error("GET / HTTP/1.2\r\nHost: h\r\n\r\n").status, 505);
  EXPECT_EQ(http_parse_error("GET / HTTP/0.9\r\n\r\n").status, 505);
}

TEST(HttpParser, StaysFailedAfterAnError) {
  HttpParser p;
  EXPECT_FALSE(p.feed("GET / HTTP/3.0\r\n\r\n"));
  EXPECT_FALSE(p.feed("GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_FALSE(p.next_request().has_value());
  EXPECT_FALSE(p.mid_request());
  EXPECT_EQ(p.error().status, 505);
}

}  // namespace
}  // namespace agentkv
