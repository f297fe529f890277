#include "tokenizer/chat_template.h"

#include "tokenizer/chat_formats.h"
#include "tokenizer/chat_tools.h"

namespace agentkv {

namespace chat_formats {

void put_content(RenderedChat& r, std::string_view content) {
  r.content_spans.emplace_back(r.text.size(), r.text.size() + content.size());
  r.text += content;
}

std::string trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

std::optional<std::string> template_literal(const std::string& tmpl, size_t quote) {
  if (quote >= tmpl.size()) return std::nullopt;
  const char q = tmpl[quote];
  std::string out;
  for (size_t i = quote + 1; i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if (c == q) return out;
    if (c == '\\' && i + 1 < tmpl.size()) {
      const char e = tmpl[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      continue;
    }
    out += c;
  }
  return std::nullopt;
}

}  // namespace chat_formats

ChatFormat detect_chat_format(const Tokenizer& tok) {
  const std::string& t = tok.chat_template();
  auto has = [&t](std::string_view s) { return t.find(s) != std::string::npos; };
  if (has("<|im_start|>")) return has("<tool_call>") ? ChatFormat::kQwen : ChatFormat::kChatML;
  if (has("<|start_header_id|>")) return ChatFormat::kLlama3;
  if (has("<|user|>") && has("<|end|>")) return ChatFormat::kPhi3;
  if (has("<start_of_turn>")) return ChatFormat::kGemma;
  if (t.empty()) {
    if (tok.architecture().rfind("gemma", 0) == 0 || tok.find_token("<start_of_turn>") >= 0) {
      return ChatFormat::kGemma;
    }
    if (tok.find_token("<|im_start|>") >= 0) return ChatFormat::kChatML;
    if (tok.find_token("<|start_header_id|>") >= 0) return ChatFormat::kLlama3;
  }
  return ChatFormat::kUnknown;
}

Result<ChatTurnMarkers> chat_turn_markers(const Tokenizer& tok) {
  switch (detect_chat_format(tok)) {
    case ChatFormat::kChatML:
    case ChatFormat::kQwen:
      return ChatTurnMarkers{"<|im_end|>\n", "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"};
    case ChatFormat::kLlama3:
      return ChatTurnMarkers{"<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\n",
                             "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"};
    case ChatFormat::kPhi3:
      return ChatTurnMarkers{"<|end|>\n", "<|user|>\n", "<|end|>\n<|assistant|>\n"};
    case ChatFormat::kGemma:
      return ChatTurnMarkers{"<end_of_turn>\n", "<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n"};
    case ChatFormat::kUnknown:
      break;
  }
  return make_error("chat template: the tokenizer has no known chat format");
}

ToolCallSyntax tool_call_syntax(const Tokenizer& tok) {
  if (detect_chat_format(tok) == ChatFormat::kLlama3 && chat_formats::llama3_has_tool_format(tok.chat_template()))
    return ToolCallSyntax{"{\"name\": \"", "\", \"parameters\": ", "}", "", false};
  return kGenericToolCalls;
}

Result<RenderedChat> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatToolDef> tools, std::string_view date) {
  const ChatFormat format = detect_chat_format(tok);
  const std::string& tmpl = tok.chat_template();
  if (format == ChatFormat::kLlama3 && chat_formats::llama3_has_tool_format(tmpl))
    return chat_formats::render_llama3(tmpl, messages, add_generation_prompt, tools, date);
  const bool chatml = format == ChatFormat::kChatML || format == ChatFormat::kQwen;
  const std::string default_system = chatml ? chat_formats::chatml_default_system(tmpl) : std::string();
  std::vector<ChatMessage> lowered;
  if (needs_tool_lowering(messages, tools)) {
    lowered = lower_tool_messages(messages, tools, default_system,
                                  format == ChatFormat::kQwen ? ToolStyle::kQwen : ToolStyle::kGeneric);
    messages = lowered;
  }
  switch (format) {
    case ChatFormat::kChatML:
    case ChatFormat::kQwen:
      return chat_formats::render_chatml(messages, add_generation_prompt, default_system,
                                         format == ChatFormat::kQwen && tmpl.find("reasoning_content") != std::string::npos);
    case ChatFormat::kLlama3:
      return chat_formats::render_llama3(tmpl, messages, add_generation_prompt, {}, date);
    case ChatFormat::kPhi3:
      return chat_formats::render_phi3(messages, add_generation_prompt,
                                       tok.eos_id() >= 0 ? tok.token_text(tok.eos_id()) : std::string());
    case ChatFormat::kGemma:
      return chat_formats::render_gemma(messages, add_generation_prompt);
    case ChatFormat::kUnknown:
      break;
  }
  return make_error("chat template: unsupported template (known: ChatML, Qwen, Llama 3.x, Phi-3, Gemma)");
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
