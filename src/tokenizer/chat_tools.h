// The generic tool format: how tools, an assistant's tool calls and tool results are written into a
// conversation for models whose chat template has no tool format of its own (SmolLM2's ChatML and
// Gemma 3's both lack one). Documented for users in docs/tools.md.
//
//   system message   += "\n\n" + the tool prompt (the tools' definitions, one JSON object a line,
//                       between <tools> and </tools>, and how to call them)
//   assistant call   :  <tool_call>\n{"name": "NAME", "arguments": ARGUMENTS}\n</tool_call>
//                       (one block a call, separated by "\n"; after the message's text, if any)
//   tool results     :  a user turn of <tool_response>\nCONTENT\n</tool_response> blocks (consecutive
//                       tool messages share one turn), so role alternation (Gemma) still holds.
//
// The server's grammar for tool calls (server/structured_output.h) and its parser of calls in the
// output (server/tool_call_stream.h) use the same strings, from here.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace agentkv {

inline constexpr std::string_view kToolCallOpen = "<tool_call>\n{\"name\": \"";
inline constexpr std::string_view kToolCallArguments = "\", \"arguments\": ";
inline constexpr std::string_view kToolCallClose = "}\n</tool_call>";
inline constexpr std::string_view kToolCallSeparator = "\n";

// The text of one call, as the model writes it: kToolCallOpen NAME kToolCallArguments ARGS kToolCallClose.
std::string tool_call_text(const ChatToolCall& call);

// The system prompt section that offers `tools`.
std::string tool_prompt(std::span<const ChatToolDef> tools);

// Messages with tools, tool calls and tool results turned into plain system/user/assistant
// messages in the generic format. default_system: the template's own system prompt, used (with the
// tool prompt after it) when the conversation has no system message and tools are offered.
std::vector<ChatMessage> lower_tool_messages(std::span<const ChatMessage> messages, std::span<const ChatToolDef> tools,
                                             const std::string& default_system);

// Whether a conversation needs lowering: tools are offered, or a message has tool calls or is a tool result.
bool needs_tool_lowering(std::span<const ChatMessage> messages, std::span<const ChatToolDef> tools);

}  // namespace agentkv
