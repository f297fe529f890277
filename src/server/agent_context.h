// An agent's conversation as prompt tokens, written by the model's chat template. Each turn is
// re-rendered in full; the engine reuses the longest common prefix with the agent's retained KV, so
// a template or tokenization that rewrites an earlier part only costs recomputing from there.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv {

// With add_generation_prompt the text ends where the assistant's answer starts. Gemma's template
// wants alternating user/model turns: consecutive messages of one role are joined into one turn
// (paragraphs), and a context of only a system message renders as the opening of the first user
// turn (Gemma puts the system text there), so that it is a prefix of every later rendering.
Result<std::vector<int32_t>> agent_context_tokens(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt);

}  // namespace agentkv
