#include "util/json.h"

#include <gtest/gtest.h>

namespace agentkv {
namespace {

TEST(Json, ParsesAndDumpsRoundTrip) {
  const std::string text = R"({"a":[1,2.5,-3e2,true,false,null],"b":{"c":"x\ny\u00e9\ud83d\ude00"},"d":""})";
  auto j = Json::parse(text);
  ASSERT_TRUE(j.ok()) << j.error();
  EXPECT_EQ(j->get("a")->items().size(), 6u);
  EXPECT_EQ(j->get("a")->items()[2].as_number(), -300.0);
  EXPECT_EQ(j->get("b")->get("c")->as_string(), "x\ny\xC3\xA9\xF0\x9F\x98\x80");
  auto again = Json::parse(j->dump());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->dump(), j->dump());
}

TEST(Json, ErrorsNameTheProblemAndOffset) {
  const char* bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "tru", "01", "1.", "\"\\x\"", "\"\\ud800\"",
                       "[1] 2", "{\"a\":1,}", "\"\x01\"", "\"\xff\"", "1e999"};
  for (const char* b : bad) {
    auto j = Json::parse(b);
    EXPECT_FALSE(j.ok()) << b;
    if (!j.ok()) {
      EXPECT_NE(j.error().find("offset"), std::string::npos) << j.error();
    }
  }
}

TEST(Json, DepthIsBounded) {
  std::string deep(100000, '[');
  auto j = Json::parse(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.error().find("nesting"), std::string::npos);
}

// A repeated key keeps its first position and takes the last value, for small objects (scanned) and
// large ones (indexed) alike.
TEST(Json, RepeatedKeysKeepFirstPositionAndLastValue) {
  for (int extra : {0, 40}) {
    std::string text = "{\"a\":1,\"b\":2";
    for (int i = 0; i < extra; ++i) text += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
    text += ",\"a\":3}";
    auto j = Json::parse(text);
    ASSERT_TRUE(j.ok()) << j.error();
    ASSERT_EQ(j->members().size(), size_t(2 + extra));
    EXPECT_EQ(j->members()[0].first, "a");
    EXPECT_EQ(j->get("a")->as_number(), 3.0);
    EXPECT_EQ(j->get("b")->as_number(), 2.0);
  }
}

// An HTTP body can hold hundreds of thousands of distinct keys; they all parse, in order (this took
// quadratic time when every member was checked against all earlier ones).
TEST(Json, ObjectWithManyKeysParses) {
  constexpr int kKeys = 400000;
  std::string text = "{";
  for (int i = 0; i < kKeys; ++i) {
    const std::string n = std::to_string(i);
    text.append(i ? ",\"k" : "\"k").append(n).append("\":").append(n);
  }
  text += "}";
  auto j = Json::parse(text);
  ASSERT_TRUE(j.ok()) << j.error();
  ASSERT_EQ(j->members().size(), size_t(kKeys));
  EXPECT_EQ(j->members().back().first, "k399999");
  EXPECT_EQ(j->get("k123456")->as_number(), 123456.0);
}

TEST(Json, QuoteEscapesAndReplacesInvalidUtf8) {
  std::string out;
  json_quote(out, std::string("a\"b\\\t\x01\xff", 7));
  EXPECT_EQ(out, "\"a\\\"b\\\\\\t\\u0001\xEF\xBF\xBD\"");
}

TEST(Json, NumbersPrintShortest) {
  EXPECT_EQ(Json::number(96.18).dump(), "96.18");
  EXPECT_EQ(Json::number(3).dump(), "3");
  EXPECT_EQ(Json::number(0.1).dump(), "0.1");
}

}  // namespace
}  // namespace agentkv
