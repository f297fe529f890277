// The generic tool format: rendering tools, calls and results into a conversation, and splitting an
// answer into text and calls, streamed in any cut or whole.
#include <gtest/gtest.h>

#include "engine/grammar_matcher.h"
#include "server/structured_output.h"
#include "server/tool_call_stream.h"
#include "tokenizer/chat_tools.h"

namespace agentkv {
namespace {

// Feeds `answer` in pieces of `cut` bytes; returns (text, calls' names, calls' arguments) as the
// deltas build them.
struct Rebuilt {
  std::string text;
  std::vector<std::string> names, arguments, ids;
};
Rebuilt stream(ToolCallStream& s, const std::string& answer, size_t cut) {
  Rebuilt r;
  auto take = [&](const std::vector<ToolCallStream::Delta>& ds) {
    for (const auto& d : ds) {
      if (d.kind == ToolCallStream::Delta::Kind::kText) r.text += d.text;
      if (d.kind == ToolCallStream::Delta::Kind::kCallStart) {
        ASSERT_EQ(d.call, int(r.names.size()));
        r.names.push_back(d.text);
        r.ids.push_back(d.id);
        r.arguments.emplace_back();
      }
      if (d.kind == ToolCallStream::Delta::Kind::kArguments) r.arguments.at(size_t(d.call)) += d.text;
    }
  };
  for (size_t i = 0; i < answer.size(); i += cut) take(s.push(answer.substr(i, cut)));
  take(s.finish());
  return r;
}

TEST(ToolCallStream, CallsInAnyCut) {
  const std::string answer = tool_call_text({"", "get_weather", "{\"city\": \"Paris \\\"}\", \"days\": [1, {\"x\": 2}]}"}) +
                             std::string(kToolCallSeparator) + tool_call_text({"", "noop", "{}"});
  for (size_t cut : {1, 2, 3, 7, 1000}) {
    ToolCallStream s(true, true, "call_abc");
    const Rebuilt r = stream(s, answer, cut);
    EXPECT_EQ(r.text, "") << cut;
    ASSERT_TRUE(s.has_calls()) << cut;
    ASSERT_EQ(s.calls().size(), 2u);
    EXPECT_EQ(s.calls()[0].name, "get_weather");
    EXPECT_EQ(s.calls()[0].arguments, "{\"city\": \"Paris \\\"}\", \"days\": [1, {\"x\": 2}]}");
    EXPECT_EQ(s.calls()[1].name, "noop");
    EXPECT_EQ(s.calls()[1].arguments, "{}");
    EXPECT_EQ(r.names, (std::vector<std::string>{"get_weather", "noop"}));
    EXPECT_EQ(r.arguments[0], s.calls()[0].arguments);
    EXPECT_EQ(r.arguments[1], "{}");
    EXPECT_EQ(r.ids[0], "call_abc_0");
    EXPECT_EQ(r.ids[1], "call_abc_1");
  }
}

// Llama 3.x's syntax: {"name": NAME, "parameters": ARGS}, one call an answer, or text that only
// starts like one.
TEST(ToolCallStream, LlamaJsonCallsInAnyCut) {
  const ToolCallSyntax llama{"{\"name\": \"", "\", \"parameters\": ", "}", "", false};
  const std::string call = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo}\", \"n\": [1]}}";
  for (size_t cut : {1, 2, 5, 1000}) {
    ToolCallStream s(true, true, "c", llama);
    const Rebuilt r = stream(s, call, cut);
    EXPECT_EQ(r.text, "") << cut;
    ASSERT_TRUE(s.has_calls()) << cut;
    ASSERT_EQ(s.calls().size(), 1u);
    EXPECT_EQ(s.calls()[0].name, "get_weather");
    EXPECT_EQ(s.calls()[0].arguments, "{\"city\": \"Oslo}\", \"n\": [1]}");
    EXPECT_EQ(r.arguments.at(0), s.calls()[0].arguments);
  }
  ToolCallStream more(true, true, "c", llama);  // nothing may follow the one call
  stream(more, call + "\n" + call, 1000);
  EXPECT_FALSE(more.has_calls());
  ToolCallStream text(true, true, "c", llama);
  const Rebuilt t = stream(text, "{\"nam and more", 3);
  EXPECT_FALSE(text.has_calls());
  EXPECT_EQ(t.text, "{\"nam and more");
}

// The answer's grammar follows the model's syntax: Llama 3.x's one JSON call (no second one, not the
// generic block); under auto with a JSON response format the two could not be told apart: a 400.
TEST(ToolCallStream, GrammarFollowsTheModelsSyntax) {
  const ToolCallSyntax llama{"{\"name\": \"", "\", \"parameters\": ", "}", "", false};
  CompletionRequest cr;
  cr.tools.push_back({"get_weather", "", Json{{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}, false});
  cr.tool_choice = ToolChoice::kRequired;
  auto accepts = [](const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarMatcher m(g, nullptr);
    return m.advance_bytes(text) && m.complete();
  };
  std::shared_ptr<const Grammar> g;
  ASSERT_FALSE(output_grammar(cr, llama, &g).has_value());
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"));
  EXPECT_FALSE(accepts(g, "{\"name\": \"get_weather\", \"parameters\": {}}\n{\"name\": \"get_weather\", \"parameters\": {}}"));
  EXPECT_FALSE(accepts(g, tool_call_text({"", "get_weather", "{}"})));
  ASSERT_FALSE(output_grammar(cr, kGenericToolCalls, &g).has_value());
  EXPECT_TRUE(accepts(g, tool_call_text({"", "get_weather", "{}"})));
  cr.tool_choice = ToolChoice::kAuto;
  cr.response_format.kind = ResponseFormat::Kind::kJsonObject;
  const auto refused = output_grammar(cr, llama, &g);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400);
  EXPECT_FALSE(output_grammar(cr, kGenericToolCalls, &g).has_value());
}

TEST(ToolCallStream, TextUnderAutoIsHeldOnlyWhileItCouldBeACall) {
  ToolCallStream s(true, true, "c");
  auto d = s.push("<tool");  // could still be a call
  EXPECT_TRUE(d.empty());
  d = s.push("box is here");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "<toolbox is here");
  EXPECT_TRUE(s.finish().empty());
  EXPECT_FALSE(s.has_calls());

  ToolCallStream t(true, true, "c");
  Rebuilt r = stream(t, "<tool_", 1);  // ends inside the opening: it was text
  EXPECT_EQ(r.text, "<tool_");
  EXPECT_FALSE(t.has_calls());

  ToolCallStream none(false, false, "c");  // no tools: everything is text, at once
  d = none.push("<tool_call>\n{");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "<tool_call>\n{");
}

TEST(ToolCallStream, UnfinishedCallIsNoCall) {
  ToolCallStream s(true, false, "c");
  const std::string whole = tool_call_text({"", "f", "{\"a\": 1}"});
  stream(s, whole.substr(0, whole.size() - 3), 4);  // cut by max_tokens
  EXPECT_FALSE(s.has_calls());
  EXPECT_EQ(s.raw(), whole.substr(0, whole.size() - 3));
}

TEST(ChatTools, LoweringRendersToolsCallsAndResults) {
  std::vector<ChatToolDef> tools{{"get_weather", "Weather by city", "{\"type\":\"object\"}"}};
  ChatMessage call{"assistant", ""};
  call.tool_calls.push_back({"call_1", "get_weather", "{\"city\":\"Oslo\"}"});
  ChatMessage r1{"tool", "rain"};
  r1.tool_call_id = "call_1";
  ChatMessage r2{"tool", "cold"};
  r2.tool_call_id = "call_2";
  std::vector<ChatMessage> msgs{{"user", "Weather?"}, call, r1, r2, {"assistant", "Rain and cold."}};
  const auto out = lower_tool_messages(msgs, tools, "You are helpful.");
  ASSERT_EQ(out.size(), 5u);  // system added, the two results share one user turn
  EXPECT_EQ(out[0].role, "system");
  EXPECT_EQ(out[0].content.rfind("You are helpful.\n\n# Tools", 0), 0u);
  EXPECT_NE(out[0].content.find("\"name\": \"get_weather\", \"description\": \"Weather by city\""), std::string::npos);
  EXPECT_EQ(out[2].content, tool_call_text(call.tool_calls[0]));
  EXPECT_EQ(out[3].role, "user");
  EXPECT_EQ(out[3].content, "<tool_response>\nrain\n</tool_response>\n<tool_response>\ncold\n</tool_response>");
  EXPECT_EQ(out[4].content, "Rain and cold.");

  // A system message of the client's own gets the tool prompt after it; no tools: nothing added.
  const auto with_sys = lower_tool_messages(std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "x"}}, tools, "");
  ASSERT_EQ(with_sys.size(), 2u);
  EXPECT_EQ(with_sys[0].content.rfind("Be brief.\n\n# Tools", 0), 0u);
  EXPECT_FALSE(needs_tool_lowering(std::vector<ChatMessage>{{"user", "x"}}, {}));
}

}  // namespace
}  // namespace agentkv
