// The piece tokenization of a turn and an agent's chat-templated context (share/turn_pieces.h).
#include "share/turn_pieces.h"

#include <algorithm>

namespace agentkv {

namespace {

// The rendering, and where each message's content sits in it (RenderedChat's content_spans).
Result<RenderedChat> render(const Tokenizer& tok, std::span<const ChatMessage> messages, bool add_generation_prompt) {
  if (detect_chat_format(tok) != ChatFormat::kGemma) return render_chat(tok, messages, add_generation_prompt);
  std::vector<ChatMessage> merged;
  for (const ChatMessage& m : messages) {
    if (!merged.empty() && merged.back().role == m.role && m.role != "system")
      merged.back().content += "\n\n" + m.content;
    else
      merged.push_back(m);
  }
  if (merged.size() == 1 && merged[0].role == "system" && !add_generation_prompt) {
    RenderedChat r;
    r.text = "<start_of_turn>user\n";
    r.content_spans.emplace_back(r.text.size(), r.text.size() + merged[0].content.size());
    r.text += merged[0].content + "\n\n";
    return r;
  }
  return render_chat(tok, merged, add_generation_prompt);
}

// Where one piece of the text ends, how it is tokenized, and whether it is a reported segment.
struct Piece {
  size_t end;
  bool special, segment;
};

// The pieces (in order, covering the text) tokenized one by one; BOS before the first.
AgentContextTokens encode_pieces(const Tokenizer& tok, std::string_view text, std::span<const Piece> pieces) {
  AgentContextTokens out;
  size_t done = 0;
  bool first = true;
  for (const Piece& p : pieces) {
    const int64_t begin = int64_t(out.tokens.size());
    const std::vector<int32_t> t = tok.encode(text.substr(done, p.end - done), first && tok.add_bos_default(), p.special);
    first = false;
    out.tokens.insert(out.tokens.end(), t.begin(), t.end());
    if (p.segment) out.segments.emplace_back(begin, int64_t(out.tokens.size()));
    done = p.end;
  }
  return out;
}

}  // namespace

AgentContextTokens tokenize_pieces(const Tokenizer& tok, std::string_view text,
                                   std::span<const std::pair<size_t, size_t>> segments, bool parse_special) {
  std::vector<Piece> pieces;
  for (const auto& [at, end] : segments) {
    pieces.push_back({at, parse_special, false});
    pieces.push_back({end, false, true});
  }
  pieces.push_back({text.size(), parse_special, false});
  return encode_pieces(tok, text, pieces);
}

Result<AgentContextTokens> agent_context_pieces(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                               std::span<const std::string> segments, bool add_generation_prompt) {
  RenderedChat r;
  AGENTKV_ASSIGN_OR_RETURN(r, render(tok, messages, add_generation_prompt));
  const std::string_view text = r.text;
  // A segment is looked for only inside one content, after the previous one found (so it never
  // swallows the template's markers); one found nowhere is skipped.
  const auto& spans = r.content_spans;
  std::vector<std::pair<size_t, size_t>> found;
  size_t span = 0, done = 0;
  for (const std::string& seg : segments) {
    if (seg.empty()) continue;
    for (size_t k = span; k < spans.size(); ++k) {
      const size_t at = text.substr(0, spans[k].second).find(seg, std::max(done, spans[k].first));
      if (at == std::string_view::npos) continue;
      found.emplace_back(at, at + seg.size());
      span = k;
      done = at + seg.size();
      break;
    }
  }
  // Only the template writes special tokens: a content holding special-token text is tokenized as
  // plain text (as encode_chat does), every other one with its surroundings exactly as always. The
  // test is per content, so an agent's earlier messages tokenize the same in every later rendering.
  std::vector<Piece> pieces;
  size_t f = 0;
  for (const auto& [b, e] : spans) {
    const bool forged = tok.has_special_text(text.substr(b, e - b));
    if (forged) pieces.push_back({b, true, false});
    for (; f < found.size() && found[f].second <= e; ++f) {
      pieces.push_back({found[f].first, !forged, false});
      pieces.push_back({found[f].second, false, true});
    }
    if (forged) pieces.push_back({e, false, false});
  }
  pieces.push_back({text.size(), true, false});
  AgentContextTokens out = encode_pieces(tok, text, pieces);
  out.text = std::move(r.text);
  return out;
}

AgentContextTokens chat_message_pieces(const Tokenizer& tok, std::string_view text,
                                       std::span<const ChatMessage> messages) {
  std::vector<std::pair<size_t, size_t>> found;
  size_t done = 0;
  for (const ChatMessage& m : messages) {
    // Templates may trim a message (Gemma's does); its trimmed content is what they render.
    const size_t b = m.content.find_first_not_of(" \t\n\r\f\v");
    if (b == std::string::npos) continue;
    const std::string_view content = std::string_view(m.content).substr(b, m.content.find_last_not_of(" \t\n\r\f\v") - b + 1);
    const size_t at = text.find(content, done);
    if (at == std::string::npos) continue;
    found.emplace_back(at, at + content.size());
    done = at + content.size();
  }
  return tokenize_pieces(tok, text, found, true);
}

}  // namespace agentkv
