// The token alignment of a chat agent's context across two model families, for handing a resident
// context to another model (POST /v1/agents/{id}/transfer).
//
// Which text is transferred: the receiver's own rendering of the agent's messages (its chat template,
// its tokens), not the sender's detokenized context. The two templates differ around every message
// (ChatML's <|im_start|>role ... <|im_end|>, Gemma's <start_of_turn>user ... <end_of_turn>, with the
// system prompt inside the first user turn and consecutive turns of one role joined), so a receiver
// holding the sender's text would hold a conversation in a format it was not trained on, and its next
// turn, rendered with its own template, would share no prefix with that context past the first
// marker: the transferred KV would be recomputed at once. Rendered by the receiver, the context is
// token for token what a native agent with the same messages holds, so later turns resume from it,
// and a transfer that recomputes everything (native_last covering it) is native prefill exactly.
//
// How the two renderings align: each message's content is the same bytes in both, so both are put
// on one axis where every content found in both (in order) occupies the same range, and its tokens
// align by the bytes they cover, as transfer of plain text does; the template text between two such
// contents (one turn's end, the next one's header) differs, and is stretched over one common range on
// both sides, so a receiver marker pools the sender's marker text at the same relative place
// ("<start_of_turn>" the sender's "<|im_start|>", "user" its "user").
#pragma once

#include <span>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "transfer/token_alignment.h"
#include "util/status.h"

namespace agentkv {

struct ChatContextAlignment {
  // Each side's context tokens (share/turn_pieces.h's agent_context_pieces, without the generation
  // prompt: what an agent's resident context holds) with spans over one common axis (equal
  // text_bytes), the input of align_tokens.
  TokenSpans sender, receiver;
};

// `segments`: the agent's round blocks (server/agent_registry.h), tokenized on their own as in every
// rendering of its context.
Result<ChatContextAlignment> align_chat_contexts(const Tokenizer& sender, const Tokenizer& receiver,
                                                 std::span<const ChatMessage> messages,
                                                 std::span<const std::string> segments);

}  // namespace agentkv
