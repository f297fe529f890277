// The native renderers behind tokenizer/chat_template.h, one file a format (chat_format_*.cpp), and
// the small pieces they share. Internal to the tokenizer layer.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"

namespace agentkv::chat_formats {

// Appends content to the text and records where it sits (RenderedChat::content_spans).
void put_content(RenderedChat& r, std::string_view content);
// Jinja's `trim`: leading and trailing whitespace removed.
std::string trim(std::string_view s);
// The string literal that starts at `quote` (a ' or ") in template text, with \n, \t and \\ escapes
// resolved; nullopt when it does not close.
std::optional<std::string> template_literal(const std::string& tmpl, size_t quote);

// ChatML and Qwen. default_system: the template's own system prompt (written when the first message
// is not a system one; "" for none); qwen3_thinking: Qwen3's handling of <think> blocks.
RenderedChat render_chatml(std::span<const ChatMessage> msgs, bool gen, const std::string& default_system,
                           bool qwen3_thinking);
// The default system prompt of a ChatML template: the content of the first literal of the shape
// '<|im_start|>system\n...<|im_end|>\n' in it ("" if there is none).
std::string chatml_default_system(const std::string& tmpl);

// Llama 3.x. Tools are offered (and calls written) in Llama's own syntax when the template has it
// (llama3_has_tool_format); otherwise the caller lowers them to the generic format first.
Result<RenderedChat> render_llama3(const std::string& tmpl, std::span<const ChatMessage> msgs, bool gen,
                                   std::span<const ChatToolDef> tools, std::string_view date);
bool llama3_has_tool_format(const std::string& tmpl);

// Phi-3 (3.5's template). eos: the EOS token's text, written when no generation prompt follows.
RenderedChat render_phi3(std::span<const ChatMessage> msgs, bool gen, const std::string& eos);

// Gemma 2 and 3.
Result<RenderedChat> render_gemma(std::span<const ChatMessage> msgs, bool gen);

}  // namespace agentkv::chat_formats
