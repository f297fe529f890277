// The generic tool format: how tools, an assistant's tool calls and tool results are written into a
// conversation for models whose chat template has no tool format of its own (SmolLM2's ChatML, Gemma's
// and Phi-3's lack one). Documented for users in docs/tools.md. Qwen's templates use the same call and
// result syntax with their own tool section (ToolStyle::kQwen); Llama 3.x has a syntax of its own
// (tokenizer/chat_format_llama3.cpp), and tool_call_syntax() says which syntax a model's answers use.
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
#include "util/json.h"

namespace agentkv {

inline constexpr std::string_view kToolCallOpen = "<tool_call>\n{\"name\": \"";
inline constexpr std::string_view kToolCallArguments = "\", \"arguments\": ";
inline constexpr std::string_view kToolCallClose = "}\n</tool_call>";
inline constexpr std::string_view kToolCallSeparator = "\n";

// How a format writes calls in an answer: open NAME arguments ARGS close, calls joined by separator;
// parallel: whether one answer may hold more than one call.
struct ToolCallSyntax {
  std::string_view open, arguments, close, separator;
  bool parallel;
};
inline constexpr ToolCallSyntax kGenericToolCalls{kToolCallOpen, kToolCallArguments, kToolCallClose, kToolCallSeparator,
                                                  true};
// The syntax of the model's chat format: Llama 3.1-3.3's own, else the generic one.
ToolCallSyntax tool_call_syntax(const Tokenizer& tok);

// How a tool section and the calls in history are written: the generic format, or Qwen's templates'
// (their tool section; call arguments written as Python's json.dumps writes them).
enum class ToolStyle { kGeneric, kQwen };

// The text of one call, as the model writes it: kToolCallOpen NAME kToolCallArguments ARGS kToolCallClose.
std::string tool_call_text(const ChatToolCall& call);

// The system prompt section that offers `tools`.
std::string tool_prompt(std::span<const ChatToolDef> tools, ToolStyle style = ToolStyle::kGeneric);

// A tool definition as {"type": "function", "function": {"name", "description", "parameters"}} (the
// OpenAI shape chat templates receive); its parameters parsed back from their JSON text where they parse.
Json tool_definition_json(const ChatToolDef& tool);

// A call's arguments as Python's json.dumps writes the object (what templates' `tojson` writes); the
// text as sent when it is not JSON, {} when empty.
std::string python_arguments(const std::string& arguments);

// Messages with tools, tool calls and tool results turned into plain system/user/assistant
// messages in the generic format. default_system: the template's own system prompt, used (with the
// tool prompt after it) when the conversation has no system message and tools are offered.
std::vector<ChatMessage> lower_tool_messages(std::span<const ChatMessage> messages, std::span<const ChatToolDef> tools,
                                             const std::string& default_system, ToolStyle style = ToolStyle::kGeneric);

// Whether a conversation needs lowering: tools are offered, or a message has tool calls or is a tool result.
bool needs_tool_lowering(std::span<const ChatMessage> messages, std::span<const ChatToolDef> tools);

}  // namespace agentkv
