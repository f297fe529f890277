// The native chat renderers (tokenizer/chat_format_*.cpp) against what the families' own templates
// render under Hugging Face's renderer: tests/data/chat_templates/goldens.json, written by
// scripts/make_chat_template_goldens.py from the templates llama.cpp keeps (llama-cpp-python 0.3.36 sdist).
// Each template's text becomes a hand-made vocabulary's tokenizer.chat_template, so the format is
// detected from it as from a GGUF. A template that refuses a conversation (Llama 3.x with two calls in
// one message) must be refused here too. No model files.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/chat_tools.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/json.h"

namespace agentkv {
namespace {

const Json& goldens() {
  static const Json g = [] {
    std::ifstream in(std::string(AGENTKV_SOURCE_DIR) + "/tests/data/chat_templates/goldens.json", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = parse_json(ss.str());
    EXPECT_TRUE(j.ok()) << (j.ok() ? "" : j.error());
    return j.ok() ? *j : Json();
  }();
  return g;
}

// A byte-level vocabulary holding the template's special tokens, with its EOS.
std::unique_ptr<Tokenizer> tokenizer_for(const Json& t) {
  VocabData v;
  v.model = "gpt2";
  v.pre = "smollm";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(unicode::byte_to_utf8(static_cast<uint8_t>(b)));
  v.token_types.assign(256, static_cast<int32_t>(TokenType::kNormal));
  for (const char* s : {"<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                        "<|eot_id|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>", "<|endoftext|>", "<s>",
                        "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"}) {
    if (t["eos_token"].get<std::string>() == s) v.eos = int32_t(v.tokens.size());
    v.tokens.push_back(s);
    v.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  }
  v.chat_template = t["text"].get<std::string>();
  auto tok = Tokenizer::create(std::move(v));
  EXPECT_TRUE(tok.ok());
  return tok.ok() ? std::move(tok).value() : nullptr;
}

std::vector<ChatMessage> messages_of(const Json& j) {
  std::vector<ChatMessage> out;
  for (const Json& m : j) {
    ChatMessage c{m["role"].get<std::string>(), m["content"].get<std::string>()};
    if (m.contains("tool_call_id")) c.tool_call_id = m["tool_call_id"].get<std::string>();
    if (m.contains("tool_calls"))
      for (const Json& tc : m["tool_calls"])  // arguments as a client sends them: compact JSON text
        c.tool_calls.push_back({tc["id"].get<std::string>(), tc["function"]["name"].get<std::string>(),
                                dump_json(tc["function"]["arguments"])});
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ChatToolDef> tools_of(const Json& j) {
  std::vector<ChatToolDef> out;
  if (j.is_array())
    for (const Json& t : j)
      out.push_back({t["function"]["name"].get<std::string>(), t["function"].value("description", ""),
                     dump_json(t["function"]["parameters"])});
  return out;
}

TEST(ChatTemplateGolden, EveryCaseRendersAsTheTemplateDoes) {
  const Json& g = goldens();
  ASSERT_TRUE(g.contains("cases"));
  const std::string date = g["date"].get<std::string>();
  size_t checked = 0;
  for (const Json& c : g["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const Json& t = g["templates"][name];
    auto tok = tokenizer_for(t);
    ASSERT_TRUE(tok);
    const std::string what = name + " / " + c["label"].get<std::string>() +
                             (c["add_generation_prompt"].get<bool>() ? " / generation prompt" : "");
    const auto msgs = messages_of(c["messages"]);
    const auto tools = tools_of(c["tools"]);
    auto r = render_chat(*tok, msgs, c["add_generation_prompt"].get<bool>(), tools, date);
    if (c.contains("error")) {
      EXPECT_FALSE(r.ok()) << what << ": the template refuses it (" << c["error"].get<std::string>() << ")";
      ++checked;
      continue;
    }
    ASSERT_TRUE(r.ok()) << what << ": " << r.error();
    std::string want = c["text"].get<std::string>();
    const std::string bos = t["bos_token"].get<std::string>();  // BOS is added by encoding, not written
    if (!bos.empty() && want.starts_with(bos)) want.erase(0, bos.size());
    EXPECT_EQ(r->text, want) << what;
    // Every content span lies inside the text.
    for (const auto& [b, e] : r->content_spans) EXPECT_TRUE(b <= e && e <= r->text.size()) << what;
    ++checked;
  }
  EXPECT_GE(checked, 80u);
}

TEST(ChatTemplateGolden, FormatsAndToolSyntaxFollowTheTemplate) {
  const Json& g = goldens();
  const std::pair<const char*, ChatFormat> want[] = {{"qwen2.5", ChatFormat::kQwen},   {"qwen3", ChatFormat::kQwen},
                                                     {"llama3.1", ChatFormat::kLlama3}, {"llama3.2", ChatFormat::kLlama3},
                                                     {"phi3.5", ChatFormat::kPhi3},     {"gemma2", ChatFormat::kGemma}};
  for (const auto& [name, format] : want) {
    auto tok = tokenizer_for(g["templates"][name]);
    ASSERT_TRUE(tok);
    EXPECT_EQ(detect_chat_format(*tok), format) << name;
    const ToolCallSyntax s = tool_call_syntax(*tok);
    if (format == ChatFormat::kLlama3) {
      EXPECT_EQ(s.open, "{\"name\": \"") << name;
      EXPECT_EQ(s.arguments, "\", \"parameters\": ") << name;
      EXPECT_FALSE(s.parallel) << name;
    } else {
      EXPECT_EQ(s.open, kToolCallOpen) << name;
    }
    EXPECT_TRUE(chat_turn_markers(*tok).ok()) << name;
  }
}

TEST(ChatTemplateGolden, PythonStyleJson) {
  auto j = parse_json(R"({"a":[1,2.5,{"b":null}],"c":{},"d":[],"e":"é\n\"","f":true})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(dump_json_python(*j), R"({"a": [1, 2.5, {"b": null}], "c": {}, "d": [], "e": "é\n\"", "f": true})");
  EXPECT_EQ(dump_json_python(*j, 2),
            "{\n  \"a\": [\n    1,\n    2.5,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": {},\n  \"d\": [],\n"
            "  \"e\": \"é\\n\\\"\",\n  \"f\": true\n}");
}

}  // namespace
}  // namespace agentkv
