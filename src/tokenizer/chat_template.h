// Prompt formatting for chat models. We do not run Jinja: the two formats we need are recognised
// and rendered natively. Tools, assistant tool calls and tool results are rendered in the generic
// tool format of tokenizer/chat_tools.h (neither template has a tool format of its own).
//   * ChatML (the GGUF's tokenizer.chat_template contains "<|im_start|>"), e.g. SmolLM2. If the
//     template injects a default system prompt when the first message is not a system one, that
//     prompt is taken from the template text itself.
//   * Gemma ("<start_of_turn>" is a token): system content is prefixed to the first turn, the
//     assistant role is written "model", content is trimmed, roles must alternate user/model.
//     <bos> is not part of the text: encode with add_bos_default().
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv {

// One call an assistant message made (OpenAI's tool_calls[i]): arguments is the JSON text as sent.
struct ChatToolCall {
  std::string id, name, arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role, content;
  std::string name;                     // the author's name, where given (not rendered)
  std::string tool_call_id;             // role "tool": the call this message answers
  std::vector<ChatToolCall> tool_calls; // role "assistant": the calls it made
};

// A function the model may call: its name, description and JSON-Schema parameters (JSON text).
struct ChatToolDef {
  std::string name, description, parameters_json;
};

enum class ChatFormat { kUnknown, kChatML, kGemma };

ChatFormat detect_chat_format(const Tokenizer& tok);

// The rendered conversation and where each message's content sits in it ([begin, end) byte offsets),
// so content can be tokenized as plain text: only the template inserts special tokens.
struct RenderedChat {
  std::string text;
  std::vector<std::pair<size_t, size_t>> content_spans;
};

Result<RenderedChat> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatToolDef> tools = {});

// The prompt's token ids. Content never becomes a special token: text such as "<|im_end|>" in a
// user's message is encoded as plain text, so no one can forge another turn. A conversation whose
// content holds no special-token text gets exactly the ids of its whole text (BOS as the model wants).
// nullopt: more than max_tokens (encoding stops soon after the limit: Tokenizer::encode_within).
std::optional<std::vector<int32_t>> encode_chat(const Tokenizer& tok, const RenderedChat& chat,
                                                int64_t max_tokens = std::numeric_limits<int64_t>::max());

// tools: offered to the model in the system message (empty: none offered). Messages with tool calls
// or of role "tool" are rendered in the generic tool format whether or not tools are offered.
Result<std::string> apply_chat_template(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt, std::span<const ChatToolDef> tools = {});

}  // namespace agentkv
