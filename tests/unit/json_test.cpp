// Tests of parse_json and dump_json (src/util/json.h) on nlohmann::ordered_json: the strictness and
// bounds the server relies on for untrusted bodies, exact 64-bit integers, and no NaN/Inf written.
#include "util/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace agentkv {
namespace {

TEST(Json, ParsesAndDumpsRoundTrip) {
  const std::string text = R"({"a":[1,2.5,-3e2,true,false,null],"b":{"c":"x\ny\u00e9\ud83d\ude00"},"d":""})";
  auto j = parse_json(text);
  ASSERT_TRUE(j.ok()) << j.error();
  EXPECT_EQ((*j)["a"].size(), 6u);
  EXPECT_EQ((*j)["a"][2].get<double>(), -300.0);
  EXPECT_EQ((*j)["b"]["c"].get<std::string>(), "x\ny\xC3\xA9\xF0\x9F\x98\x80");
  auto again = parse_json(dump_json(*j));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(dump_json(*again), dump_json(*j));
}

TEST(Json, ErrorsNameTheProblemAndOffset) {
  const char* bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "tru", "01", "1.", "\"\\x\"", "\"\\ud800\"",
                       "[1] 2", "{\"a\":1,}", "\"\x01\"", "\"\xff\"", "1e999", "\"\\udc00\"", "\"\xed\xa0\x80\"",
                       "\"\xc0\xaf\"", "\"\xe2\x82\"", "NaN", "{'a':1}"};
  for (const char* b : bad) {
    auto j = parse_json(b);
    EXPECT_FALSE(j.ok()) << b;
    if (!j.ok()) {
      EXPECT_NE(j.error().find("offset"), std::string::npos) << j.error();
    }
  }
}

TEST(Json, DepthIsBounded) {
  std::string deep(100000, '[');
  auto j = parse_json(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.error().find("nesting"), std::string::npos);
  // The top level is depth 0: max_depth levels of nesting inside it parse, one more does not.
  EXPECT_TRUE(parse_json("[[[1]]]", 3).ok());
  EXPECT_FALSE(parse_json("[[[[1]]]]", 3).ok());
  EXPECT_FALSE(parse_json("{\"a\":{\"b\":{\"c\":{\"d\":1}}}}", 3).ok());
}

// A key given twice in one object is an error naming it, for small objects (scanned) and large ones
// (indexed) alike, at any depth; the same key in two objects is not a repeat.
TEST(Json, RepeatedKeysAreRefusedByName) {
  for (int extra : {0, 40}) {
    std::string text = "{\"a\":1,\"b\":{\"a\":2}";
    for (int i = 0; i < extra; ++i) text += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
    EXPECT_TRUE(parse_json(text + "}").ok()) << extra;
    auto j = parse_json(text + ",\"a\":3}");
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.error().find("duplicate key 'a'"), std::string::npos) << j.error();
    auto inner = parse_json("[{\"x\":[{\"model\":1,\"model\":2}]}]");
    ASSERT_FALSE(inner.ok());
    EXPECT_NE(inner.error().find("duplicate key 'model'"), std::string::npos) << inner.error();
  }
}

// Input is quoted in errors only as an excerpt: a megabyte key or string is not echoed whole.
TEST(Json, ErrorsQuoteAnExcerptOfTheInput) {
  const std::string big(1 << 20, 'k');
  auto dup = parse_json("{\"" + big + "\":1,\"" + big + "\":2}");
  ASSERT_FALSE(dup.ok());
  EXPECT_LT(dup.error().size(), 200u) << dup.error().substr(0, 200);
  EXPECT_NE(dup.error().find("(1048576 bytes)"), std::string::npos);
  auto bad = parse_json("{\"a\":\"" + big + "\x01\"}");  // a control character inside a long string
  ASSERT_FALSE(bad.ok());
  EXPECT_LT(bad.error().size(), 400u) << bad.error().substr(0, 400);
  EXPECT_EQ(excerpt("short"), "short");
  EXPECT_EQ(excerpt(std::string(100, 'x')), std::string(64, 'x') + "\xE2\x80\xA6(100 bytes)");
  // Never cut inside a UTF-8 character: 63 ASCII bytes then a two-byte 'é' keeps 63 bytes.
  EXPECT_EQ(excerpt(std::string(63, 'x') + "\xC3\xA9" + std::string(10, 'y')), std::string(63, 'x') + "\xE2\x80\xA6(75 bytes)");
}

// An HTTP body can hold hundreds of thousands of distinct keys; they all parse, in order (this takes
// quadratic time when every member is checked against all earlier ones, as a plain ordered_json
// parse does).
TEST(Json, ObjectWithManyKeysParses) {
  constexpr int kKeys = 400000;
  std::string text = "{";
  for (int i = 0; i < kKeys; ++i) {
    const std::string n = std::to_string(i);
    text.append(i ? ",\"k" : "\"k").append(n).append("\":").append(n);
  }
  text += "}";
  auto j = parse_json(text);
  ASSERT_TRUE(j.ok()) << j.error();
  ASSERT_EQ(j->size(), size_t(kKeys));
  EXPECT_EQ(std::prev(j->end()).key(), "k399999");
  ASSERT_NE(json_member(*j, "k123456"), nullptr);
  EXPECT_EQ(json_member(*j, "k123456")->get<int>(), 123456);
}

TEST(Json, DumpEscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(dump_json(Json(std::string("a\"b\\\t\x01\xff", 7))), "\"a\\\"b\\\\\\t\\u0001\xEF\xBF\xBD\"");
}

// Peak resident memory in KiB since the last reset (Linux: /proc/self/status VmHWM; writing 5 to
// clear_refs resets it); -1 where unavailable.
long peak_rss_kib(bool reset) {
  if (reset) std::ofstream("/proc/self/clear_refs") << "5";
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(Json, LongestArrayCountsWithoutBuilding) {
  EXPECT_EQ(json_longest_array(R"({"a":[1,2,3],"b":[[1,2],[{"x":[1,2,3,4]}]]})", 100), 4u);
  EXPECT_EQ(json_longest_array(R"({"k1":1,"k2":2,"k3":3})", 100), 0u);  // members are not elements
  EXPECT_EQ(json_longest_array("[1,2,3,4,5,6]", 3), 4u);                // stops at limit + 1
  EXPECT_EQ(json_longest_array("[1,2,3,", 100), 3u);                    // malformed: what came before
  EXPECT_EQ(json_longest_array(std::string(100000, '['), 100), 1u);     // deep nesting stops the count

  // An 8 MB body of token ids (issue 21): the scan refuses it in O(depth) memory, where the tree
  // would cost hundreds of MB.
  std::string body = R"({"model":"smollm2","prompt":[)";
  size_t ids = 1;
  for (; body.size() < (size_t(8) << 20); ++ids) body += "1,";
  body += "1]}";
  const long before = peak_rss_kib(true);
  EXPECT_EQ(json_longest_array(body, 8192), 8193u);
  const long scanned = peak_rss_kib(false);
  if (before < 0 || scanned < before) GTEST_SKIP() << "no VmHWM reset here";
  EXPECT_LT(scanned - before, 1024) << "the scan grew peak RSS by " << scanned - before << " KiB";
  EXPECT_EQ(json_longest_array(body, size_t(1) << 30), ids);
  peak_rss_kib(true);
  const long base = peak_rss_kib(false);
  ASSERT_TRUE(parse_json(body).ok());
  std::printf("8 MB of token ids: scan +%ld KiB peak RSS, parse_json tree +%ld KiB\n", scanned - before,
              peak_rss_kib(false) - base);
}

TEST(Json, NumbersPrintShortest) {
  EXPECT_EQ(dump_json(Json(96.18)), "96.18");
  EXPECT_EQ(dump_json(Json(3)), "3");
  EXPECT_EQ(dump_json(Json(0.1)), "0.1");
}

// NaN and Inf are not JSON: dump_json writes null for them (json.h states this), and the text it writes
// always parses back.
TEST(Json, NonFiniteNumbersAreWrittenAsNull) {
  Json j = Json::object();
  j["nan"] = std::nan("");
  j["inf"] = std::numeric_limits<double>::infinity();
  j["neg_inf"] = -std::numeric_limits<float>::infinity();
  j["list"] = Json::array({1.5, std::nan("")});
  const std::string text = dump_json(j);
  EXPECT_EQ(text, R"({"nan":null,"inf":null,"neg_inf":null,"list":[1.5,null]})");
  EXPECT_TRUE(parse_json(text).ok());
}

// Integers are exact up to the ends of int64 and uint64, past 2^53 where a double would round.
TEST(Json, IntegersRoundTripExactly) {
  const std::string text = R"([9007199254740993,9223372036854775807,-9223372036854775808,18446744073709551615])";
  auto j = parse_json(text);
  ASSERT_TRUE(j.ok()) << j.error();
  EXPECT_EQ((*j)[0].get<int64_t>(), (int64_t(1) << 53) + 1);
  EXPECT_EQ((*j)[1].get<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ((*j)[2].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((*j)[3].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(dump_json(*j), text);
  Json out = Json::object();
  out["seed"] = uint64_t(std::numeric_limits<int64_t>::max());
  out["id"] = (int64_t(1) << 53) + 1;
  EXPECT_EQ(dump_json(out), R"({"seed":9223372036854775807,"id":9007199254740993})");
}

}  // namespace
}  // namespace agentkv
