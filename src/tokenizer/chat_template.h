// Prompt formatting for chat models. We do not run Jinja: the two formats we need are recognised
// and rendered natively.
//   * ChatML (the GGUF's tokenizer.chat_template contains "<|im_start|>"), e.g. SmolLM2. If the
//     template injects a default system prompt when the first message is not a system one, that
//     prompt is taken from the template text itself.
//   * Gemma ("<start_of_turn>" is a token): system content is prefixed to the first turn, the
//     assistant role is written "model", content is trimmed, roles must alternate user/model.
//     <bos> is not part of the text: encode with add_bos_default().
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv {

// One call of a tool in an assistant message of the history (OpenAI's tool_calls[i]): arguments is
// the JSON text exactly as the client sent it.
struct ChatToolCall {
  std::string id, name, arguments;
};

// The optional fields have default initializers so that ChatMessage{role, content} stays warning-free.
struct ChatMessage {
  std::string role, content;
  std::string name = {};                      // the speaker's name, when the client gives one
  std::string tool_call_id = {};              // role "tool": the call this message answers
  std::vector<ChatToolCall> tool_calls = {};  // role "assistant": the calls it made
};

enum class ChatFormat { kUnknown, kChatML, kGemma };

ChatFormat detect_chat_format(const Tokenizer& tok);

Result<std::string> apply_chat_template(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt);

}  // namespace agentkv
