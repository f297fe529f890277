// A turn's prompt tokenized piece by piece at its marked segment boundaries,
// [prefix][shared block][own ...], so that a shared block is the same tokens in every agent's
// context whatever precedes it (what collective KV sharing reuses). One implementation for every
// caller: the agents and rounds API and the quality gate (chat-templated conversations, below), the
// benchmark's plain-text workloads and the sharing tests.
//
// An agent's conversation is written by the model's chat template. Each turn is re-rendered in
// full; the engine reuses the longest common prefix with the agent's retained KV, so a template or
// tokenization that rewrites an earlier part only costs recomputing from there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv {

struct AgentContextTokens {
  std::vector<int32_t> tokens;
  // Token ranges [first, second) of the marked segments found in the rendering, in order.
  std::vector<std::pair<int64_t, int64_t>> segments;
  // The rendering the tokens spell out (agent_context_pieces only; a KV transfer aligns it).
  std::string text;
};

// `text` with the byte ranges `segments` ([begin, end), in order, not overlapping; empty ones allowed)
// tokenized on their own, without special tokens, and the text around them with `parse_special`;
// BOS before the first piece when the tokenizer adds one. The pieces concatenate to the prompt.
AgentContextTokens tokenize_pieces(const Tokenizer& tok, std::string_view text,
                                   std::span<const std::pair<size_t, size_t>> segments, bool parse_special);

// With add_generation_prompt the text ends where the assistant's answer starts. Gemma's template
// wants alternating user/model turns: consecutive messages of one role are joined into one turn
// (paragraphs), and a context of only a system message renders as the opening of the first user
// turn (Gemma puts the system text there), so that it is a prefix of every later rendering.
//
// Only the template writes special tokens: a message's content holding special-token text (a user's
// "<|im_end|>", "<end_of_turn>") is tokenized as plain text, so no one can forge a turn; content
// without such text tokenizes with its surroundings exactly as the whole rendering would.
//
// `segments` are texts the agent received as a round's shared block, in order. Each is found in one
// message's content (after the previous one) and tokenized on its own, without special tokens, so that it
// is the same token sequence in every agent's context whatever precedes it (what collective KV
// sharing reuses), and the same again in every later rendering of this agent (what keeps its
// resident KV reusable). A segment the template does not render verbatim is tokenized as part of
// the surrounding text and not reported.
Result<AgentContextTokens> agent_context_pieces(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                               std::span<const std::string> segments, bool add_generation_prompt);

// A chat request's rendered `text` (apply_chat_template of `messages`) with each message's content
// tokenized on its own (found in order; one the template does not render verbatim is not a piece):
// the message segments that chat sharing reuses at any position (engine/chat_sharing.h).
AgentContextTokens chat_message_pieces(const Tokenizer& tok, std::string_view text,
                                       std::span<const ChatMessage> messages);

inline Result<std::vector<int32_t>> agent_context_tokens(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                                         std::span<const std::string> segments,
                                                         bool add_generation_prompt) {
  auto c = agent_context_pieces(tok, messages, segments, add_generation_prompt);
  if (!c.ok()) return make_error(c.error());
  return std::move(c->tokens);
}

}  // namespace agentkv
