// Cross-tokenizer alignment on shared text: each token's exact byte span in the text, and for each
// receiver token the run of sender tokens whose spans cover its bytes. K/V for a receiver token is
// built from that run (src/transfer/paired_features.h), so the run must be exact and minimal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv {

// Tokens of a text with their byte spans [begin, end). Spans tile the text in order; a token that
// decodes to nothing (BOS) has an empty span at the offset where it stands.
struct TokenSpans {
  std::vector<int32_t> tokens;
  std::vector<size_t> begin, end;
  size_t text_bytes = 0;
  size_t size() const { return tokens.size(); }
};

// Encodes `text` (no special-token parsing: context text is data) and decodes it piece by piece.
// Byte spans make byte-fallback tokens and characters split over several tokens exact: each token
// owns exactly the bytes it decodes to, except that bytes the tokenizer dropped (no token for
// them) belong to the token after them, and an SPM space may stand for U+2581 in the text. Fails, naming the offset, if the pieces do not otherwise
// concatenate back to the text (a tokenizer that normalises would break the alignment).
Result<TokenSpans> tokenize_with_spans(const Tokenizer& tok, std::string_view text, bool add_bos);
// The same for tokens the caller made from `text` (they must spell it out, as above). With
// `special_text` (a chat-templated rendering tokenized with special tokens) a control token such as
// "<|im_start|>" owns its own text where the text holds it; a leading BOS the tokenizer added
// stands for no text either way.
Result<TokenSpans> spans_of_tokens(const Tokenizer& tok, std::string_view text, std::vector<int32_t> tokens,
                                   bool special_text);

// Receiver token r is built from sender tokens [first[r], first[r] + count[r]): every sender token
// with a non-empty span that overlaps r's span. count[r] == 0 for an empty receiver span.
struct TokenAlignment {
  std::vector<int32_t> first, count;
  size_t size() const { return first.size(); }
};

// Both must span the same text (equal text_bytes); an invariant, checked.
TokenAlignment align_tokens(const TokenSpans& receiver, const TokenSpans& sender);

}  // namespace agentkv
