// Prompt formatting for chat models. We do not run Jinja: the formats of the families agentkv loads are
// recognised from the GGUF's tokenizer.chat_template and rendered natively, each in a file of its own
// (chat_format_*.cpp), held to what the templates render under Hugging Face's renderer
// (tests/data/chat_templates/goldens.json, scripts/make_chat_template_goldens.py).
//   * ChatML ("<|im_start|>"), e.g. SmolLM2: if the template injects a default system prompt when the
//     first message is not a system one, that prompt is taken from the template text itself. Tools in
//     the generic format of tokenizer/chat_tools.h.
//   * Qwen (ChatML whose template has "<tool_call>": Qwen2, Qwen2.5, Qwen3): ChatML with Qwen's own tool
//     section (Hermes-style <tools>/<tool_call>/<tool_response>, the same call syntax as the generic
//     format); Qwen3's templates (they read reasoning_content) drop <think> blocks of the assistant turns
//     before the last user query and write an empty one on the last turn, as Qwen3's template does.
//   * Llama 3.x ("<|start_header_id|>"): header/eot turns; 3.1-3.3 templates add their system preamble
//     (knowledge date, today's date) and Llama's JSON tool calls ({"name": ..., "parameters": ...}, one
//     call per message; tools offered in the first user message; results as "ipython" turns).
//   * Phi-3 ("<|user|>" and "<|end|>"), as Phi-3.5's template: an empty system message is left out, the
//     text ends with the EOS token when no generation prompt follows. Tools in the generic format.
//   * Gemma ("<start_of_turn>" is a token; Gemma 2 and 3): system content is prefixed to the first turn
//     (Gemma 3's rule; Gemma 2's template refuses a system message instead), the assistant role is
//     written "model", content is trimmed, roles must alternate user/model. Tools in the generic format.
// The BOS token is never part of the text: encode with add_bos_default().
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

enum class ChatFormat { kUnknown, kChatML, kQwen, kLlama3, kPhi3, kGemma };

ChatFormat detect_chat_format(const Tokenizer& tok);

// A format's turn texts: end_of_turn closes a turn, user_open opens a user turn, assistant_open closes
// a user turn and opens the assistant's reply. A verifier appends end_of_turn user_open QUESTION
// assistant_open to a context whose assistant turn is open (prm/verify_head).
struct ChatTurnMarkers {
  std::string end_of_turn, user_open, assistant_open;
};
Result<ChatTurnMarkers> chat_turn_markers(const Tokenizer& tok);

// The rendered conversation and where each message's content sits in it ([begin, end) byte offsets),
// so content can be tokenized as plain text: only the template inserts special tokens.
struct RenderedChat {
  std::string text;
  std::vector<std::pair<size_t, size_t>> content_spans;
};

// date: the date Llama 3.2's template writes ("07 Mar 2026"); empty: today's, in UTC.
Result<RenderedChat> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatToolDef> tools = {}, std::string_view date = {});

// The prompt's token ids. Content never becomes a special token: text such as "<|im_end|>" in a
// user's message is encoded as plain text, so no one can forge another turn. A conversation whose
// content holds no special-token text gets exactly the ids of its whole text (BOS as the model wants).
// nullopt: more than max_tokens (encoding stops soon after the limit: Tokenizer::encode_within).
std::optional<std::vector<int32_t>> encode_chat(const Tokenizer& tok, const RenderedChat& chat,
                                                int64_t max_tokens = std::numeric_limits<int64_t>::max());

// tools: offered to the model as the format does (empty: none offered). Messages with tool calls or of
// role "tool" are rendered in the format's tool syntax whether or not tools are offered.
Result<std::string> apply_chat_template(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt, std::span<const ChatToolDef> tools = {});

}  // namespace agentkv
