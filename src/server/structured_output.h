// The grammar a chat request's answer must follow, from its response_format and its tools with
// tool_choice (engine/grammar.h; the sampler masks tokens with it):
//   response_format json_object         any JSON object
//   response_format json_schema         a value of the schema (engine/json_schema_grammar.h)
//   tools, tool_choice required         one call of any tool (or several, with parallel_tool_calls,
//                                       where the model's syntax allows it), in the model's tool-call
//                                       syntax (tokenizer/chat_tools.h: the generic one, or Llama 3.x's
//                                       JSON calls), whose arguments are a value of that tool's
//                                       parameters schema
//   tools, tool_choice {function}       the same, of that function only
//   tools, tool_choice auto             calls as above, or an answer that does not start like a call
//                                       (free text, or the response_format's value when it has one;
//                                       refused where a call and a JSON value could start alike,
//                                       as Llama 3.x's calls are JSON objects)
//   otherwise                           no grammar: the answer is free, as without these fields
#pragma once

#include <memory>
#include <optional>

#include "engine/grammar.h"
#include "server/openai_protocol.h"
#include "tokenizer/chat_tools.h"

namespace agentkv {

// *out: the grammar, or null when the answer is unconstrained. An error (400) names the schema
// keyword or field that cannot be compiled.
std::optional<ApiError> output_grammar(const CompletionRequest& cr, const ToolCallSyntax& syntax,
                                       std::shared_ptr<const Grammar>* out);

// Whether the answer can hold tool calls / text, for ToolCallStream (server/tool_call_stream.h).
bool calls_allowed(const CompletionRequest& cr);
bool text_allowed(const CompletionRequest& cr);

// The tools to offer in the prompt (none under tool_choice none).
std::vector<ChatToolDef> offered_tools(const CompletionRequest& cr);

}  // namespace agentkv
