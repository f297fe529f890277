#include "tokenizer/chat_template.h"

#include "tokenizer/chat_tools.h"

namespace agentkv {

namespace {

// The default system message of templates written like SmolLM2's:
//   {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n...<|im_end|>\n' }}
// Returns the literal between the quotes with \n escapes resolved, or "" if there is none.
std::string chatml_default_system(const std::string& tmpl) {
  const size_t cond = tmpl.find("!= 'system'");
  if (cond == std::string::npos) return {};
  const size_t open = tmpl.find("{{ '<|im_start|>system", cond);
  const size_t endif = tmpl.find("{% endif %}", cond);
  if (open == std::string::npos || (endif != std::string::npos && open > endif)) return {};
  const size_t start = open + 4;
  std::string out;
  for (size_t i = start; i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if (c == '\'') return out;
    if (c == '\\' && i + 1 < tmpl.size()) {
      const char e = tmpl[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      continue;
    }
    out += c;
  }
  return {};  // unterminated literal: ignore
}

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Appends a message's content to the rendered text and records where it is.
void put_content(RenderedChat& r, std::string_view content) {
  r.content_spans.emplace_back(r.text.size(), r.text.size() + content.size());
  r.text += content;
}

RenderedChat render_chatml(const Tokenizer& tok, std::span<const ChatMessage> msgs, bool gen) {
  RenderedChat r;
  if (!msgs.empty() && msgs[0].role != "system") r.text += chatml_default_system(tok.chat_template());
  for (const ChatMessage& m : msgs) {
    r.text += "<|im_start|>" + m.role + "\n";
    put_content(r, m.content);
    r.text += "<|im_end|>\n";
  }
  if (gen) r.text += "<|im_start|>assistant\n";
  return r;
}

Result<RenderedChat> render_gemma(std::span<const ChatMessage> msgs, bool gen) {
  std::string_view system;  // Gemma has no system role: its content opens the first turn
  const bool has_system = !msgs.empty() && msgs[0].role == "system";
  if (has_system) {
    system = msgs[0].content;
    msgs = msgs.subspan(1);
  }
  RenderedChat r;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if ((m.role == "user") != (i % 2 == 0)) {
      return make_error("chat template: Gemma conversations must alternate user/assistant, got '" + m.role +
                        "' at turn " + std::to_string(i));
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    r.text += "<start_of_turn>" + role + "\n";
    if (i == 0 && has_system) {
      put_content(r, system);
      r.text += "\n\n";
    }
    put_content(r, trim(m.content));
    r.text += "<end_of_turn>\n";
  }
  if (gen) r.text += "<start_of_turn>model\n";
  return r;
}

}  // namespace

ChatFormat detect_chat_format(const Tokenizer& tok) {
  const std::string& t = tok.chat_template();
  if (t.find("<|im_start|>") != std::string::npos) return ChatFormat::kChatML;
  if (t.find("<start_of_turn>") != std::string::npos) return ChatFormat::kGemma;
  if (t.empty()) {
    if (tok.architecture().rfind("gemma", 0) == 0 || tok.find_token("<start_of_turn>") >= 0) {
      return ChatFormat::kGemma;
    }
    if (tok.find_token("<|im_start|>") >= 0) return ChatFormat::kChatML;
  }
  return ChatFormat::kUnknown;
}

namespace {

// The content of a ChatML template's default system message ("" if none).
std::string chatml_default_system_content(const Tokenizer& tok) {
  const std::string block = chatml_default_system(tok.chat_template());
  const std::string head = "<|im_start|>system\n", tail = "<|im_end|>\n";
  if (block.size() < head.size() + tail.size() || block.compare(0, head.size(), head) != 0) return {};
  return block.substr(head.size(), block.size() - head.size() - tail.size());
}

}  // namespace

Result<RenderedChat> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatToolDef> tools) {
  std::vector<ChatMessage> lowered;
  if (needs_tool_lowering(messages, tools)) {
    const std::string default_system =
        detect_chat_format(tok) == ChatFormat::kChatML ? chatml_default_system_content(tok) : std::string();
    lowered = lower_tool_messages(messages, tools, default_system);
    messages = lowered;
  }
  switch (detect_chat_format(tok)) {
    case ChatFormat::kChatML:
      return render_chatml(tok, messages, add_generation_prompt);
    case ChatFormat::kGemma:
      return render_gemma(messages, add_generation_prompt);
    case ChatFormat::kUnknown:
      break;
  }
  return make_error("chat template: unsupported template (neither ChatML nor Gemma)");
}

Result<std::string> apply_chat_template(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt, std::span<const ChatToolDef> tools) {
  auto r = render_chat(tok, messages, add_generation_prompt, tools);
  if (!r.ok()) return std::move(r).take_error();
  return std::move(r->text);
}

std::optional<std::vector<int32_t>> encode_chat(const Tokenizer& tok, const RenderedChat& chat, int64_t max_tokens) {
  bool forged = false;
  for (const auto& [b, e] : chat.content_spans)
    forged = forged || tok.has_special_text(std::string_view(chat.text).substr(b, e - b));
  // The common case: the same ids as the whole text, as always.
  if (!forged) return tok.encode_within(chat.text, tok.add_bos_default(), true, max_tokens);
  // Content holding special-token text: the template's parts with specials, content as plain text.
  std::vector<int32_t> out;
  size_t done = 0;
  auto append = [&](std::string_view piece, bool special) {
    const std::vector<int32_t> t = tok.encode(piece, out.empty() && done == 0 && tok.add_bos_default(), special);
    out.insert(out.end(), t.begin(), t.end());
  };
  for (const auto& [b, e] : chat.content_spans) {
    append(std::string_view(chat.text).substr(done, b - done), true);
    done = b;
    append(std::string_view(chat.text).substr(b, e - b), false);
    done = e;
  }
  append(std::string_view(chat.text).substr(done), true);
  if (int64_t(out.size()) > max_tokens) return std::nullopt;
  return out;
}

}  // namespace agentkv
