// Request validation and response shapes of the OpenAI API layer (no model, no sockets).
#include <gtest/gtest.h>

#include "server/openai_protocol.h"

#include <cstdint>
#include <utility>

namespace agentkv {
namespace {

std::optional<ApiError> parse(const std::string& body, bool chat, CompletionRequest* out) {
  auto j = parse_json(body);
  EXPECT_TRUE(j.ok()) << body;
  return parse_completion_request(*j, chat, ApiLimits{}, out);
}

TEST(OpenAiProtocol, ParsesAChatRequest) {
  CompletionRequest r;
  auto e = parse(R"({"model":"smollm2","messages":[{"role":"system","content":"Be brief."},
                   {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
                   "max_tokens":20,"temperature":0,"top_p":0.9,"n":2,"seed":5,"stop":["\n"],
                   "logprobs":true,"top_logprobs":3,"stream":true,"stream_options":{"include_usage":true}})",
                 true, &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.model, "smollm2");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(*r.max_tokens, 20);
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(*r.seed, 5u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiProtocol, ChatTakesTheSharingFields) {
  CompletionRequest r;
  ASSERT_FALSE(parse(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", true, &r));
  EXPECT_FALSE(r.kv_sharing.has_value());  // the server's default
  EXPECT_FALSE(r.recompute.has_value());
  ASSERT_FALSE(parse(R"({"model":"m","messages":[{"role":"user","content":"x"}],"kv_sharing":false,"recompute":0.3})",
                     true, &r));
  EXPECT_EQ(r.kv_sharing, false);
  EXPECT_DOUBLE_EQ(*r.recompute, 0.3);
  ASSERT_FALSE(parse(R"({"model":"m","messages":[{"role":"user","content":"x"}],"kv_sharing":null,"recompute":1})",
                     true, &r));
  EXPECT_FALSE(r.kv_sharing.has_value());
  EXPECT_DOUBLE_EQ(*r.recompute, 1.0);
}

TEST(OpenAiProtocol, ParsesCompletionPrompts) {
  CompletionRequest r;
  ASSERT_FALSE(parse(R"({"model":"m","prompt":"abc","logprobs":2})", false, &r));
  EXPECT_EQ(r.prompt, "abc");
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_FALSE(r.max_tokens.has_value());
  ASSERT_FALSE(parse(R"({"model":"m","prompt":["abc"]})", false, &r));
  EXPECT_EQ(r.prompt, "abc");
  ASSERT_FALSE(parse(R"({"model":"m","prompt":[1,2,3]})", false, &r));
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
}

TEST(OpenAiProtocol, RejectsBadRequestsNamingTheField) {
  struct Case {
    const char* body;
    bool chat;
    const char* param;
  };
  const Case cases[] = {
      {R"([1,2])", true, ""},
      {R"({"messages":[{"role":"user","content":"x"}]})", true, "model"},
      {R"({"model":"m"})", true, "messages"},
      {R"({"model":"m","messages":[]})", true, "messages"},
      {R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})", true, "messages[0].role"},
      {R"({"model":"m","messages":[{"role":"user"}]})", true, "messages[0].content"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","extra":1}]})", true, "messages[0].extra"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3})", true, "temperature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"})", true, "temperature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-1})", true, "max_tokens"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5})", true, "max_tokens"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":0})", true, "n"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0})", true, "top_p"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":[1]})", true, "stop"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]})", true, "stop"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":2})", true, "top_logprobs"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[]})", true, "tools"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temprature":1})", true, "temprature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})", true,
       "stream_options"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"presence_penalty":1})", true, "presence_penalty"},
      {R"({"model":"m","prompt":""})", false, "prompt"},
      {R"({"model":"m","prompt":{"a":1}})", false, "prompt"},
      {R"({"model":"m","prompt":[-1]})", false, "prompt"},
      {R"({"model":"m","prompt":"x","logprobs":9})", false, "logprobs"},
      {R"({"model":"m","prompt":"x","echo":true})", false, "echo"},
      {R"({"model":"m","prompt":"x","messages":[]})", false, "messages"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"kv_sharing":"yes"})", true, "kv_sharing"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"recompute":1.5})", true, "recompute"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"recompute":"all"})", true, "recompute"},
      {R"({"model":"m","prompt":"x","kv_sharing":true})", false, "kv_sharing"},
  };
  for (const Case& c : cases) {
    CompletionRequest r;
    auto e = parse(c.body, c.chat, &r);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " → " << e->message;
    EXPECT_FALSE(e->message.empty());
  }
}

// A seed is exact over its whole range: past 2^53 (where a double would round) up to 2^64 - 1, and
// negative ones modulo 2^64, as before; outside that, or a fraction, is a 400 naming 'seed'.
TEST(OpenAiProtocol, SeedIsExactPast2To53) {
  const std::pair<const char*, uint64_t> ok[] = {{"9007199254740993", (uint64_t(1) << 53) + 1},
                                                 {"9223372036854775807", uint64_t(INT64_MAX)},
                                                 {"18446744073709551615", UINT64_MAX},
                                                 {"-1", UINT64_MAX},
                                                 {"7.0", 7}};
  for (const auto& [text, want] : ok) {
    for (bool chat : {false, true}) {
      CompletionRequest r;
      const std::string body = std::string(chat ? R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":)"
                                                : R"({"model":"m","prompt":"x","seed":)") + text + "}";
      auto e = parse(body, chat, &r);
      ASSERT_FALSE(e) << body << " → " << e->message;
      ASSERT_TRUE(r.seed.has_value());
      EXPECT_EQ(*r.seed, want) << body;
    }
  }
  for (const char* text : {"1e30", "18446744073709551616", "1.5", "\"7\"", "true"}) {
    CompletionRequest r;
    const std::string body = std::string(R"({"model":"m","prompt":"x","seed":)") + text + "}";
    auto e = parse(body, false, &r);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->param, "seed") << body;
  }
}

// Integer fields compare exactly: an integer past 2^53 is not rounded into range.
TEST(OpenAiProtocol, IntegersAreNotRoundedIntoRange) {
  CompletionRequest r;
  auto e = parse(R"({"model":"m","prompt":"x","max_tokens":9223372036854775807})", false, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "max_tokens");
  EXPECT_EQ(e->message, "'max_tokens' must be in [0, 4096]");
  e = parse(R"({"model":"m","prompt":[1,4294967296]})", false, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "prompt");
  ASSERT_FALSE(parse(R"({"model":"m","prompt":[2147483647,0]})", false, &r));
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{2147483647, 0}));
}

TEST(OpenAiProtocol, ErrorObjectShape) {
  auto j = parse_json(error_json(ApiError{404, "model 'x' does not exist", "model"}));
  ASSERT_TRUE(j.ok());
  const Json* err = json_member(*j, "error");
  ASSERT_TRUE(err && err->is_object());
  EXPECT_EQ(err->at("message").get<std::string>(), "model 'x' does not exist");
  EXPECT_EQ(err->at("type").get<std::string>(), "invalid_request_error");
  EXPECT_EQ(err->at("param").get<std::string>(), "model");
  EXPECT_TRUE(err->at("code").is_null());
}

TEST(OpenAiProtocol, ResponseAndChunkShapes) {
  CompletionRequest chat;
  chat.chat = true;
  chat.model = "smollm2";
  chat.logprobs = 1;
  ChoiceOutput c;
  c.text = "Paris";
  c.finish_reason = "stop";
  TokenLogprob lp;
  lp.token = 5;
  lp.logprob = -0.5f;
  lp.top = {{5, -0.5f}};
  c.logprobs = {lp};
  c.token_texts = {"Paris"};
  c.top_texts = {{"Paris"}};
  UsageCounts u{10, 1, 8};
  const Json r = completion_response_json(chat, "chatcmpl-1", 123, {c}, u);
  EXPECT_EQ(r.at("object").get<std::string>(), "chat.completion");
  const Json& ch = r.at("choices")[0];
  EXPECT_EQ(ch.at("message").at("content").get<std::string>(), "Paris");
  EXPECT_EQ(ch.at("logprobs").at("content")[0].at("token").get<std::string>(), "Paris");
  EXPECT_EQ(r.at("usage").at("total_tokens").get<int>(), 11);
  EXPECT_EQ(r.at("usage").at("prompt_tokens_details").at("cached_tokens").get<int>(), 8);

  const Json k = stream_chunk_json(chat, "chatcmpl-1", 123, 0, "Par", "", true, nullptr, nullptr, nullptr);
  EXPECT_EQ(k.at("object").get<std::string>(), "chat.completion.chunk");
  const Json& kc = k.at("choices")[0];
  EXPECT_EQ(kc.at("delta").at("role").get<std::string>(), "assistant");
  EXPECT_EQ(kc.at("delta").at("content").get<std::string>(), "Par");
  EXPECT_TRUE(kc.at("finish_reason").is_null());

  CompletionRequest text;
  text.model = "smollm2";
  text.logprobs = 1;
  const Json t = completion_response_json(text, "cmpl-1", 123, {c}, u);
  EXPECT_EQ(t.at("object").get<std::string>(), "text_completion");
  const Json& tc = t.at("choices")[0];
  EXPECT_EQ(tc.at("text").get<std::string>(), "Paris");
  EXPECT_EQ(tc.at("logprobs").at("token_logprobs")[0].get<double>(), -0.5);
}

}  // namespace
}  // namespace agentkv
