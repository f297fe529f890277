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

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv {

struct ChatMessage {
  std::string role, content;
};

enum class ChatFormat { kUnknown, kChatML, kGemma };

ChatFormat detect_chat_format(const Tokenizer& tok);

Result<std::string> apply_chat_template(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt);

}  // namespace agentkv
