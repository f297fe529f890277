// Request validation and response shapes of the OpenAI API layer (no model, no sockets).
#include <gtest/gtest.h>

#include "server/openai_protocol.h"

#include <cctype>
#include <cstdint>
#include <set>
#include <utility>

namespace agentkv {
namespace {

std::optional<ApiError> parse(const std::string& body, bool chat, CompletionRequest* out, bool strict = false) {
  auto j = parse_json(body);
  EXPECT_TRUE(j.ok()) << body;
  ApiLimits limits;
  limits.strict_api = strict;
  return parse_completion_request(*j, chat, limits, out);
}

// body is a 400 whose param and message name `param`.
void expect_bad(const std::string& body, bool chat, const std::string& param) {
  CompletionRequest r;
  auto e = parse(body, chat, &r);
  ASSERT_TRUE(e.has_value()) << body;
  EXPECT_EQ(e->status, 400) << body;
  EXPECT_EQ(e->param, param) << body << " → " << e->message;
  EXPECT_FALSE(e->message.empty());
  EXPECT_NE(e->message.find(param), std::string::npos) << body << " → " << e->message;
}

// A chat body with one user message and the given extra members ("" for none).
std::string chat_body(const std::string& extra) {
  return R"({"model":"m","messages":[{"role":"user","content":"x"}])" + (extra.empty() ? "" : "," + extra) + "}";
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
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3})", true, "temperature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"})", true, "temperature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-1})", true, "max_tokens"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5})", true, "max_tokens"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":0})", true, "n"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0})", true, "top_p"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":[1]})", true, "stop"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]})", true, "stop"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":2})", true, "top_logprobs"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})", true,
       "stream_options"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"presence_penalty":3})", true, "presence_penalty"},
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
  for (const Case& c : cases) expect_bad(c.body, c.chat, c.param);
}

// What issue 15 added, each refusal naming its field: penalties, logit_bias, messages with tool
// history, tools, tool_choice, response_format, refused and other-endpoint fields.
TEST(OpenAiProtocol, RejectsBadToolAndFormatFieldsNamingThePath) {
  struct Case {
    std::string body;
    bool chat;
    const char* param;
  };
  const std::string fn = R"({"type":"function","function":{"name":"get_weather"}})";
  const Case cases[] = {
      {chat_body(R"("frequency_penalty":-2.5)"), true, "frequency_penalty"},
      {chat_body(R"("logit_bias":[1])"), true, "logit_bias"},
      {chat_body(R"("logit_bias":{"abc":1})"), true, "logit_bias.abc"},
      {chat_body(R"("logit_bias":{"-1":1})"), true, "logit_bias.-1"},
      {chat_body(R"("logit_bias":{"01":1})"), true, "logit_bias.01"},
      {chat_body(R"("logit_bias":{"4294967296":1})"), true, "logit_bias.4294967296"},
      {chat_body(R"("logit_bias":{"5":101})"), true, "logit_bias.5"},
      {chat_body(R"("logit_bias":{"5":"x"})"), true, "logit_bias.5"},
      {R"({"model":"m","prompt":"x","logit_bias":{"5":-100.5}})", false, "logit_bias.5"},
      // messages
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}]})",
       true, "messages[0].content[1]"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]})", true, "messages[0].content[0]"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"file"}]}]})", true, "messages[0].content[0]"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"video"}]}]})", true, "messages[0].content[0].type"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})", true, "messages[0].content[0].text"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","audio":{"id":"a"}}]})", true, "messages[0].audio"},
      {R"({"model":"m","messages":[{"role":"assistant","content":null,"function_call":{"name":"f"}}]})", true,
       "messages[0].function_call"},
      {R"({"model":"m","messages":[{"role":"assistant","content":null}]})", true, "messages[0].content"},
      {R"({"model":"m","messages":[{"role":"user","content":null}]})", true, "messages[0].content"},
      {R"({"model":"m","messages":[{"role":"tool","content":"22C"}]})", true, "messages[0].tool_call_id"},
      {R"({"model":"m","messages":[{"role":"tool","tool_call_id":"c1"}]})", true, "messages[0].content"},
      {R"({"model":"m","messages":[{"role":"tool","tool_call_id":7,"content":"x"}]})", true, "messages[0].tool_call_id"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","tool_call_id":"c1"}]})", true, "messages[0].tool_call_id"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","tool_calls":[]}]})", true, "messages[0].tool_calls"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","name":5}]})", true, "messages[0].name"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","refusal":"no"}]})", true, "messages[0].refusal"},
      {R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"user","content":"q"},{"role":"user","content":"q"},
          {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bad name","arguments":"{}"}}]}]})",
       true, "messages[3].tool_calls[0].function.name"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]})",
       true, "messages[0].tool_calls[0].id"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"code","function":{"name":"f","arguments":"{}"}}]}]})",
       true, "messages[0].tool_calls[0].type"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]})",
       true, "messages[0].tool_calls[0].function.arguments"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function"}]}]})", true,
       "messages[0].tool_calls[0].function"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":{}}]})", true, "messages[0].tool_calls"},
      // tools
      {chat_body(R"("tools":{})"), true, "tools"},
      {chat_body(R"("tools":[1])"), true, "tools[0]"},
      {chat_body(R"("tools":[)" + fn + R"(,{"type":"web_search"}])"), true, "tools[1].type"},
      {chat_body(R"("tools":[)" + fn + R"(,{"type":"function"}])"), true, "tools[1].function"},
      {chat_body(R"("tools":[)" + fn + R"(,{"type":"function","function":{"name":"a b"}}])"), true, "tools[1].function.name"},
      {chat_body(R"("tools":[{"type":"function","function":{"name":")" + std::string(65, 'a') + R"("}}])"), true,
       "tools[0].function.name"},
      {chat_body(R"("tools":[)" + fn + "," + fn + "]"), true, "tools[1].function.name"},
      {chat_body(R"("tools":[{"type":"function","function":{"name":"f","description":3}}])"), true,
       "tools[0].function.description"},
      {chat_body(R"("tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}])"), true,
       "tools[0].function.parameters"},
      {chat_body(R"("tools":[{"type":"function","function":{"name":"f","strict":"yes"}}])"), true,
       "tools[0].function.strict"},
      {chat_body(R"("tool_choice":"auto")"), true, "tool_choice"},
      {chat_body(R"("tools":[)" + fn + R"(],"tool_choice":"always")"), true, "tool_choice"},
      {chat_body(R"("tools":[)" + fn + R"(],"tool_choice":{"type":"function","function":{"name":"other"}})"), true,
       "tool_choice.function.name"},
      {chat_body(R"("tools":[)" + fn + R"(],"tool_choice":{"type":"function"})"), true, "tool_choice.function"},
      {chat_body(R"("tools":[)" + fn + R"(],"tool_choice":{"type":"allowed_tools"})"), true, "tool_choice.type"},
      {chat_body(R"("tools":[)" + fn + R"(],"tool_choice":3)"), true, "tool_choice"},
      {chat_body(R"("tools":[)" + fn + R"(],"parallel_tool_calls":"yes")"), true, "parallel_tool_calls"},
      // response_format
      {chat_body(R"("response_format":"json")"), true, "response_format"},
      {chat_body(R"("response_format":{"type":"xml"})"), true, "response_format.type"},
      {chat_body(R"("response_format":{})"), true, "response_format.type"},
      {chat_body(R"("response_format":{"type":"json_schema"})"), true, "response_format.json_schema"},
      {chat_body(R"("response_format":{"type":"json_schema","json_schema":{"schema":{}}})"), true,
       "response_format.json_schema.name"},
      {chat_body(R"("response_format":{"type":"json_schema","json_schema":{"name":"a.b"}})"), true,
       "response_format.json_schema.name"},
      {chat_body(R"("response_format":{"type":"json_schema","json_schema":{"name":"a","schema":[]}})"), true,
       "response_format.json_schema.schema"},
      {chat_body(R"("response_format":{"type":"json_schema","json_schema":{"name":"a","strict":1}})"), true,
       "response_format.json_schema.strict"},
      {chat_body(R"("response_format":{"type":"json_schema","json_schema":{"name":"a","description":{}}})"), true,
       "response_format.json_schema.description"},
      {chat_body(R"("response_format":{"type":"json_object","json_schema":{"name":"a"}})"), true,
       "response_format.json_schema"},
      // fields that would change the output, and the other endpoint's fields
      {chat_body(R"("functions":[{"name":"f"}])"), true, "functions"},
      {chat_body(R"("function_call":"auto")"), true, "function_call"},
      {chat_body(R"("audio":{"voice":"alloy"})"), true, "audio"},
      {chat_body(R"("modalities":["text","audio"])"), true, "modalities"},
      {chat_body(R"("prediction":{"type":"content","content":"x"})"), true, "prediction"},
      {chat_body(R"("web_search_options":{})"), true, "web_search_options"},
      {chat_body(R"("prompt":"x")"), true, "prompt"},
      {chat_body(R"("echo":true)"), true, "echo"},
      {R"({"model":"m","prompt":"x","best_of":2})", false, "best_of"},
      {R"({"model":"m","prompt":"x","suffix":"y"})", false, "suffix"},
      {R"({"model":"m","prompt":"x","tools":[{"type":"function","function":{"name":"f"}}]})", false, "tools"},
      {R"({"model":"m","prompt":"x","tool_choice":"none"})", false, "tool_choice"},
      {R"({"model":"m","prompt":"x","response_format":{"type":"json_object"}})", false, "response_format"},
      // the no-op fields keep their types
      {chat_body(R"("metadata":"x")"), true, "metadata"},
      {chat_body(R"("store":"yes")"), true, "store"},
      {chat_body(R"("service_tier":1)"), true, "service_tier"},
      {chat_body(R"("prompt_cache_key":{})"), true, "prompt_cache_key"},
      {chat_body(R"("user":1)"), true, "user"},
  };
  for (const Case& c : cases) expect_bad(c.body, c.chat, c.param);
}

TEST(OpenAiProtocol, ImagePartsSayWhatIsNotSupported) {
  CompletionRequest r;
  auto e = parse(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}]})",
                 true, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "messages[0].content[1]: 'image_url' parts are not supported by agentkv");
}

TEST(OpenAiProtocol, PenaltiesAndLogitBiasReachTheSampler) {
  for (bool chat : {true, false}) {
    CompletionRequest r;
    const std::string fields = R"("presence_penalty":-1.5,"frequency_penalty":2,"logit_bias":{"50256":-100,"7":100,"0":0.5})";
    std::string body = R"({"model":"m","prompt":"x",)";
    body += fields + "}";
    auto e = parse(chat ? chat_body(fields) : body, chat, &r);
    ASSERT_FALSE(e) << e->message;
    EXPECT_FLOAT_EQ(r.presence_penalty, -1.5f);
    EXPECT_FLOAT_EQ(r.frequency_penalty, 2.0f);
    const std::vector<std::pair<int32_t, float>> want = {{0, 0.5f}, {7, 100.0f}, {50256, -100.0f}};
    EXPECT_EQ(r.logit_bias, want);  // sorted by token id
    RequestParams p;
    apply_sampling(r, &p);
    EXPECT_FLOAT_EQ(p.sampling.presence_penalty, -1.5f);
    EXPECT_FLOAT_EQ(p.sampling.frequency_penalty, 2.0f);
    EXPECT_EQ(p.sampling.logit_bias, want);
    EXPECT_TRUE(p.sampling.validate().ok());
  }
  CompletionRequest r;
  std::string many;
  for (int i = 0; i <= 1024; ++i) {
    if (i) many += ',';
    many += '"' + std::to_string(i) + "\":1";
  }
  auto e = parse(chat_body("\"logit_bias\":{" + many + "}"), true, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "logit_bias");
}

// A request without the new fields reads as before: no penalty, no bias, no tools, text, nothing ignored.
TEST(OpenAiProtocol, RequestsWithoutTheNewFieldsAreUnchanged) {
  CompletionRequest r;
  ASSERT_FALSE(parse(chat_body(R"("temperature":0,"seed":1,"presence_penalty":0,"frequency_penalty":0,"logit_bias":null)"),
                     true, &r));
  RequestParams p;
  apply_sampling(r, &p);
  const SamplingParams defaults;
  EXPECT_EQ(p.sampling.presence_penalty, defaults.presence_penalty);
  EXPECT_EQ(p.sampling.frequency_penalty, defaults.frequency_penalty);
  EXPECT_TRUE(p.sampling.logit_bias.empty());
  EXPECT_TRUE(r.tools.empty());
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_EQ(r.response_format.kind, ResponseFormat::Kind::kText);
  EXPECT_TRUE(r.ignored_fields.empty());
  EXPECT_TRUE(r.messages[0].name.empty());
  EXPECT_TRUE(r.messages[0].tool_calls.empty());
}

TEST(OpenAiProtocol, ParsesAToolConversation) {
  CompletionRequest r;
  auto e = parse(R"({"model":"m","messages":[
      {"role":"developer","content":"Use tools."},
      {"role":"user","name":"ann","content":[{"type":"text","text":"Weather in "},{"type":"text","text":"Oslo?"}]},
      {"role":"assistant","content":null,"refusal":null,"audio":null,"function_call":null,
       "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},
                     {"id":"call_2","function":{"name":"get-time","arguments":""}}]},
      {"role":"tool","tool_call_id":"call_1","content":"-3C"},
      {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"12:00"}]},
      {"role":"assistant","content":"It is -3C."}]})",
                 true, &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].name, "ann");
  EXPECT_EQ(r.messages[1].content, "Weather in Oslo?");
  const ChatMessage& a = r.messages[2];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].id, "call_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(a.tool_calls[1].name, "get-time");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[3].content, "-3C");
  EXPECT_EQ(r.messages[4].content, "12:00");
  EXPECT_EQ(r.messages[5].content, "It is -3C.");
  EXPECT_TRUE(r.ignored_fields.empty());
}

TEST(OpenAiProtocol, ParsesToolsAndToolChoice) {
  const std::string tools = R"("tools":[
      {"type":"function","function":{"name":"get_weather","description":"Weather now","strict":true,
       "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
      {"type":"function","function":{"name":"noop"}}])";
  CompletionRequest r;
  ASSERT_FALSE(parse(chat_body(tools), true, &r));
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather now");
  EXPECT_TRUE(r.tools[0].strict);
  EXPECT_EQ(r.tools[0].parameters.at("required")[0].get<std::string>(), "city");
  EXPECT_TRUE(r.tools[1].parameters.is_null());
  EXPECT_FALSE(r.tools[1].strict);
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);  // OpenAI's default with tools
  EXPECT_TRUE(r.parallel_tool_calls);
  const std::pair<const char*, ToolChoice> choices[] = {
      {R"("none")", ToolChoice::kNone}, {R"("auto")", ToolChoice::kAuto}, {R"("required")", ToolChoice::kRequired},
      {R"({"type":"function","function":{"name":"noop"}})", ToolChoice::kFunction}, {"null", ToolChoice::kAuto}};
  for (const auto& [text, want] : choices) {
    CompletionRequest c;
    auto e = parse(chat_body(tools + R"(,"parallel_tool_calls":false,"tool_choice":)" + text), true, &c);
    ASSERT_FALSE(e) << text << " → " << e->message;
    EXPECT_EQ(c.tool_choice, want) << text;
    EXPECT_FALSE(c.parallel_tool_calls);
    EXPECT_EQ(c.tool_choice_name, want == ToolChoice::kFunction ? "noop" : "");
  }
  // Without tools only "none" is meaningful; an empty tools array is no tools; n > 1 with tools is fine.
  ASSERT_FALSE(parse(chat_body(R"("tool_choice":"none","tools":[])"), true, &r));
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  ASSERT_FALSE(parse(chat_body(tools + R"(,"n":3)"), true, &r));
  EXPECT_EQ(r.n, 3);
  std::string many;
  for (int i = 0; i <= 128; ++i) many += std::string(i ? "," : "") + R"({"type":"function","function":{"name":"f)" + std::to_string(i) + "\"}}";
  auto e = parse(chat_body(R"("tools":[)" + many + "]"), true, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
}

TEST(OpenAiProtocol, ParsesResponseFormats) {
  CompletionRequest r;
  ASSERT_FALSE(parse(chat_body(R"("response_format":{"type":"text"})"), true, &r));
  EXPECT_EQ(r.response_format.kind, ResponseFormat::Kind::kText);
  ASSERT_FALSE(parse(chat_body(R"("response_format":{"type":"json_object"})"), true, &r));
  EXPECT_EQ(r.response_format.kind, ResponseFormat::Kind::kJsonObject);
  ASSERT_FALSE(parse(chat_body(R"("response_format":{"type":"json_schema","json_schema":{"name":"Person",
      "description":"a person","strict":true,"schema":{"type":"object","properties":{"age":{"type":"integer"}}}}})"),
                     true, &r));
  const ResponseFormat& f = r.response_format;
  EXPECT_EQ(f.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(f.name, "Person");
  EXPECT_EQ(f.description, "a person");
  EXPECT_TRUE(f.strict);
  EXPECT_EQ(dump_json(f.schema), R"({"type":"object","properties":{"age":{"type":"integer"}}})");
  ASSERT_FALSE(parse(chat_body(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})"), true, &r));
  EXPECT_TRUE(r.response_format.schema.is_null());
  EXPECT_FALSE(r.response_format.strict);
}

// Fields that do not change the output are accepted; unknown ones too, each reported once by kind;
// under strict_api unknown ones are refused as before, and the known no-op fields still pass.
TEST(OpenAiProtocol, UnknownFieldsAreReportedOrRefusedUnderStrictApi) {
  const std::string noop =
      R"("user":"u","metadata":{"k":"v"},"store":false,"service_tier":"auto","prompt_cache_key":"p",)"
      R"("safety_identifier":"s","verbosity":"low","reasoning_effort":"low","modalities":["text"],)"
      R"("stream_options":null,"functions":null,"audio":null,"best_of":null)";
  for (bool strict : {false, true}) {
    CompletionRequest r;
    auto e = parse(chat_body(noop), true, &r, strict);
    ASSERT_FALSE(e) << e->message;
    EXPECT_TRUE(r.ignored_fields.empty());
  }
  const std::string body = R"({"model":"m","temprature":1,"x_extra":{"a":1},"messages":[
      {"role":"user","content":"x","extra":1},{"role":"user","content":"y","extra":2},
      {"role":"assistant","tool_calls":[{"id":"c","type":"function","index":0,"function":{"name":"f","arguments":"{}"}}]}],
      "tools":[{"type":"function","function":{"name":"f","x_more":1},"cache_control":{}}],
      "response_format":{"type":"json_schema","json_schema":{"name":"n","x_s":1}}})";
  CompletionRequest r;
  auto e = parse(body, true, &r);
  ASSERT_FALSE(e) << e->message;
  const std::vector<std::string> want = {"temprature",
                                         "x_extra",
                                         "messages[].extra",
                                         "messages[].tool_calls[].index",
                                         "tools[].cache_control",
                                         "tools[].function.x_more",
                                         "response_format.json_schema.x_s"};
  EXPECT_EQ(r.ignored_fields, want);
  const std::pair<std::string, const char*> refused[] = {
      {chat_body(R"("temprature":1)"), "temprature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","extra":1}]})", "messages[0].extra"},
      {chat_body(R"("tools":[{"type":"function","function":{"name":"f","x_more":1}}])"), "tools[0].function.x_more"},
      {chat_body(R"("response_format":{"type":"json_object","x":1})"), "response_format.x"},
  };
  for (const auto& [text, param] : refused) {
    CompletionRequest s;
    auto err = parse(text, true, &s, true);
    ASSERT_TRUE(err) << text;
    EXPECT_EQ(err->param, param);
    EXPECT_EQ(err->message, std::string("unknown field '") + param + "'");
  }
  // On completions too.
  ASSERT_FALSE(parse(R"({"model":"m","prompt":"x","parallel_tool_calls":true,"store":true})", false, &r));
  EXPECT_EQ(r.ignored_fields, std::vector<std::string>{"parallel_tool_calls"});
  EXPECT_TRUE(parse(R"({"model":"m","prompt":"x","x":1})", false, &r, true));
}

// messages[].name is a string and a speaker's name (check_speaker_name); a body with a key given
// twice never reaches the parser (parse_json refuses it, naming the key).
TEST(OpenAiProtocol, MessageNamesAreCheckedAndDuplicateKeysRefused) {
  expect_bad(R"({"model":"m","messages":[{"role":"user","content":"x","name":5}]})", true, "messages[0].name");
  expect_bad(R"({"model":"m","messages":[{"role":"user","content":"x","name":"a\nassistant: yes"}]})", true,
             "messages[0].name");
  expect_bad(R"({"model":"m","messages":[{"role":"user","content":"x","name":""}]})", true, "messages[0].name");
  CompletionRequest r;
  ASSERT_FALSE(parse(R"({"model":"m","messages":[{"role":"user","content":"x","name":"Ada_1"}]})", true, &r));
  EXPECT_EQ(r.messages[0].name, "Ada_1");
  auto dup = parse_json(R"({"model":"m","model":"n","prompt":"x"})");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().find("duplicate key 'model'"), std::string::npos) << dup.error();
}

// Response ids are OpenAI's shape and never repeat (they once wrapped after 65,536).
TEST(OpenAiProtocol, ResponseIdsAreUniqueAndNeverWrap) {
  std::set<std::string> seen;
  for (int i = 0; i < 200000; ++i) {
    const std::string id = new_response_id("chatcmpl");
    ASSERT_EQ(id.size(), std::string("chatcmpl-").size() + 24) << id;
    ASSERT_EQ(id.rfind("chatcmpl-", 0), 0u) << id;
    ASSERT_TRUE(seen.insert(id).second) << "repeated after " << i << ": " << id;
  }
  for (char c : new_response_id("cmpl").substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << c;
}

TEST(OpenAiProtocol, IgnoredFieldsAreLoggedOncePerProcess) {
  testing::internal::CaptureStderr();
  log_ignored_fields_once({"zz_test_field_a", "zz_test_field_b"});
  log_ignored_fields_once({"zz_test_field_a", "zz_test\nfield"});
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out,
            "agentkv: ignoring request field 'zz_test_field_a' (first use)\n"
            "agentkv: ignoring request field 'zz_test_field_b' (first use)\n"
            "agentkv: ignoring request field 'zz_test?field' (first use)\n");
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
  // -9223372036854775809 does not fit 64 bits and reads as the double -2^63 (schemathesis found it
  // accepted); 9.3e18 as a double would be an out-of-range cast.
  for (const char* text : {"1e30", "18446744073709551616", "-9223372036854775809", "9.3e18", "-9.3e18", "1.5",
                           "\"7\"", "true"}) {
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
