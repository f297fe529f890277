#include "transfer/token_alignment.h"

#include <string>

namespace agentkv {

namespace {
constexpr size_t kMaxDroppedBytes = 8;

// Bytes of `text` from `at` that `piece` stands for, or npos. SentencePiece escapes ' ' as U+2581
// and decodes U+2581 back to ' ', so in an SPM piece a space may stand for either in the text.
size_t match_piece(std::string_view text, size_t at, std::string_view piece, bool spm) {
  size_t t = at;
  for (char c : piece) {
    if (t < text.size() && text[t] == c) {
      ++t;
    } else if (spm && c == ' ' && text.substr(t, 3) == "\xE2\x96\x81") {
      t += 3;
    } else {
      return std::string_view::npos;
    }
  }
  return t - at;
}

}  // namespace

Result<TokenSpans> tokenize_with_spans(const Tokenizer& tok, std::string_view text, bool add_bos) {
  return spans_of_tokens(tok, text, tok.encode(text, add_bos, /*parse_special=*/false), /*special_text=*/false);
}

Result<TokenSpans> spans_of_tokens(const Tokenizer& tok, std::string_view text, std::vector<int32_t> tokens,
                                   bool special_text) {
  TokenSpans out;
  out.tokens = std::move(tokens);
  out.text_bytes = text.size();
  const bool spm = tok.kind() == Tokenizer::Kind::kSpm;
  size_t at = 0;
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    const int32_t id = out.tokens[i];
    // special=false: BOS and other control tokens decode to nothing, hence an empty span.
    std::string piece = tok.token_to_piece(id, /*special=*/false);
    // A template's control token owns its own text; a leading BOS was added, not rendered.
    const bool added_bos = i == 0 && id == tok.bos_id() && tok.add_bos_default();
    if (piece.empty() && special_text && !added_bos && tok.is_special(id)) {
      const std::string own = tok.token_to_piece(id, /*special=*/true);
      if (text.substr(at, own.size()) == own) piece = own;
    }
    size_t found = at, len = match_piece(text, at, piece, spm);
    // A byte with neither a token nor a byte token (llama.cpp's BPE drops it, e.g. 0x1D in
    // SmolLM2's vocabulary) leaves a gap: the next token owns the dropped bytes too, so spans
    // still tile the text. Gaps are a few bytes at most; anything else is a real mismatch.
    for (size_t skip = 1; len == std::string_view::npos && !piece.empty() && skip <= kMaxDroppedBytes; ++skip) {
      found = at + skip;
      if (found >= text.size()) break;
      len = match_piece(text, found, piece, spm);
    }
    if (len == std::string_view::npos)
      return make_error("token alignment: token " + std::to_string(id) +
                        " decodes to text that differs from the input at byte " + std::to_string(at));
    out.begin.push_back(at);
    at = found + len;
    out.end.push_back(at);
  }
  if (at < text.size() && text.size() - at <= kMaxDroppedBytes) {
    // Dropped trailing bytes belong to the last token; a text made only of dropped bytes has no
    // token to own them (and no K/V to transfer).
    if (!out.tokens.empty()) out.end.back() = text.size();
    if (out.tokens.empty() || out.begin.back() < out.end.back()) at = text.size();
  }
  if (at != text.size())
    return make_error("token alignment: tokens decode to " + std::to_string(at) + " bytes, the text has " +
                      std::to_string(text.size()));
  return out;
}

TokenAlignment align_tokens(const TokenSpans& receiver, const TokenSpans& sender) {
  AGENTKV_CHECK(receiver.text_bytes == sender.text_bytes);
  TokenAlignment a;
  a.first.resize(receiver.size());
  a.count.resize(receiver.size());
  // Both span lists are sorted and tile the text, so one forward walk finds every run.
  size_t s = 0;
  const size_t ns = sender.size();
  for (size_t r = 0; r < receiver.size(); ++r) {
    const size_t b = receiver.begin[r], e = receiver.end[r];
    if (b == e) {
      a.first[r] = int32_t(s);
      a.count[r] = 0;
      continue;
    }
    // First sender token that ends past b (empty spans never overlap anything).
    while (s < ns && (sender.end[s] <= b || sender.begin[s] == sender.end[s])) ++s;
    if (s == ns) {  // the sender has no token here: only when it dropped all of the text
      a.first[r] = int32_t(s);
      a.count[r] = 0;
      continue;
    }
    size_t last = s;
    while (last + 1 < ns && sender.begin[last + 1] < e) ++last;
    // Trailing empty spans inside the run cannot occur (they sit at a boundary < e only if a
    // non-empty token follows); skip them anyway so the run's ends are non-empty.
    while (last > s && sender.begin[last] == sender.end[last]) --last;
    a.first[r] = int32_t(s);
    a.count[r] = int32_t(last - s + 1);
    // The next receiver token starts at e; the sender token covering e-1 may cover it too.
    s = sender.end[last] > e ? last : last + 1;
  }
  return a;
}

}  // namespace agentkv
