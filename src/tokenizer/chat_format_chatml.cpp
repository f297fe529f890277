// ChatML (SmolLM2) and Qwen's ChatML (Qwen2, Qwen2.5, Qwen3): see tokenizer/chat_template.h.
#include "tokenizer/chat_formats.h"

namespace agentkv::chat_formats {

namespace {

std::string_view strip_newlines(std::string_view s, bool front, bool back) {
  while (front && !s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (back && !s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// Qwen3's assistant turn (its template): the content after the last </think>, and the reasoning between
// the last <think> and the first </think>; on turns after the last user query, the last turn (or one
// with reasoning) is written with its <think> block, every other turn without.
void put_qwen3_assistant(RenderedChat& r, std::string_view content, bool after_last_query, bool last) {
  std::string_view reasoning;
  if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
    reasoning = content.substr(0, close);
    if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos)
      reasoning = reasoning.substr(open + 7);
    reasoning = strip_newlines(strip_newlines(reasoning, false, true), true, false);
    content = strip_newlines(content.substr(content.rfind("</think>") + 8), true, false);
  }
  r.text += "<|im_start|>assistant\n";
  if (after_last_query && (last || !reasoning.empty())) {
    r.text += "<think>\n";
    put_content(r, strip_newlines(reasoning, true, true));
    r.text += "\n</think>\n\n";
    content = strip_newlines(content, true, false);
  }
  put_content(r, content);
  r.text += "<|im_end|>\n";
}

bool is_tool_response(std::string_view s) {
  return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
}

}  // namespace

std::string chatml_default_system(const std::string& tmpl) {
  const std::string head = "<|im_start|>system\n", tail = "<|im_end|>\n";
  for (size_t at = tmpl.find("'<|im_start|>system"); at != std::string::npos; at = tmpl.find("'<|im_start|>system", at + 1)) {
    const std::optional<std::string> lit = template_literal(tmpl, at);
    if (lit && lit->size() > head.size() + tail.size() && lit->starts_with(head) && lit->ends_with(tail))
      return lit->substr(head.size(), lit->size() - head.size() - tail.size());
  }
  return {};
}

RenderedChat render_chatml(std::span<const ChatMessage> msgs, bool gen, const std::string& default_system,
                           bool qwen3_thinking) {
  RenderedChat r;
  if (!msgs.empty() && msgs[0].role != "system" && !default_system.empty())
    r.text += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  // Qwen3: the last user message that is not tool results (the last message when there is none).
  size_t last_query = msgs.empty() ? 0 : msgs.size() - 1;
  for (size_t i = msgs.size(); qwen3_thinking && i-- > 0;)
    if (msgs[i].role == "user" && !is_tool_response(msgs[i].content)) {
      last_query = i;
      break;
    }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (qwen3_thinking && m.role == "assistant") {
      put_qwen3_assistant(r, m.content, i > last_query, i + 1 == msgs.size());
      continue;
    }
    r.text += "<|im_start|>" + m.role + "\n";
    put_content(r, m.content);
    r.text += "<|im_end|>\n";
  }
  if (gen) r.text += "<|im_start|>assistant\n";
  return r;
}

}  // namespace agentkv::chat_formats
