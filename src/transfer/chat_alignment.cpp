// Both renderings of a conversation on one axis (transfer/chat_alignment.h).
#include "transfer/chat_alignment.h"

#include <string_view>
#include <utility>
#include <vector>

#include "share/turn_pieces.h"

namespace agentkv {

namespace {

struct Rendering {
  std::string text;
  TokenSpans spans;  // over text
};

Result<Rendering> render(const Tokenizer& tok, std::span<const ChatMessage> messages,
                         std::span<const std::string> segments) {
  AgentContextTokens c;
  AGENTKV_ASSIGN_OR_RETURN(c, agent_context_pieces(tok, messages, segments, false));
  Rendering r;
  AGENTKV_ASSIGN_OR_RETURN(r.spans, spans_of_tokens(tok, c.text, std::move(c.tokens), /*special_text=*/true));
  r.text = std::move(c.text);
  return r;
}

// A stretch of both texts that is one range of the common axis: a content found in both (the same
// bytes on both sides), or the template text between two of them (sender_bytes x receiver_bytes
// long, so each side stretches over it by a whole factor).
struct Region {
  size_t sender_bytes = 0, receiver_bytes = 0;
  bool content = false;
  size_t common_bytes() const { return content ? sender_bytes : sender_bytes * receiver_bytes; }
};

std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") + 1 - b);
}

// The messages' contents found in both texts, in order (templates may trim a content), and the
// template text around them. A content that would leave the template text before or after it empty
// on one side only counts as template text: that side would have nothing to stretch over the other's.
std::vector<Region> regions(std::string_view st, std::string_view rt, std::span<const ChatMessage> messages) {
  std::vector<Region> out;
  size_t s_done = 0, r_done = 0;  // the end of the last content taken
  size_t s_from = 0, r_from = 0;  // where the next content is looked for
  for (const ChatMessage& m : messages) {
    const std::string_view c = trimmed(m.content);
    if (c.empty()) continue;
    const size_t s = st.find(c, s_from), r = rt.find(c, r_from);
    if (s == std::string_view::npos || r == std::string_view::npos) continue;
    s_from = s + c.size();
    r_from = r + c.size();
    const size_t gap_s = s - s_done, gap_r = r - r_done;
    if ((gap_s == 0) != (gap_r == 0)) continue;
    out.push_back({gap_s, gap_r, false});
    out.push_back({c.size(), c.size(), true});
    s_done = s_from;
    r_done = r_from;
  }
  Region tail{st.size() - s_done, rt.size() - r_done, false};
  if ((tail.sender_bytes == 0) != (tail.receiver_bytes == 0) && !out.empty()) {
    // The last content joins the template text around it (it is not empty: neither side is then).
    for (int k = 0; k < 2; ++k) {
      tail.sender_bytes += out.back().sender_bytes;
      tail.receiver_bytes += out.back().receiver_bytes;
      out.pop_back();
    }
  }
  out.push_back(tail);
  return out;
}

// One side's spans moved onto the common axis: a piecewise-linear, non-decreasing map of its byte
// offsets, so spans that tile the side's text tile the axis.
TokenSpans on_axis(const TokenSpans& t, std::span<const Region> regions, bool sender) {
  size_t total = 0;
  for (const Region& g : regions) total += g.common_bytes();
  TokenSpans out = t;
  out.text_bytes = total;
  size_t k = 0, side_begin = 0, common_begin = 0;
  auto side_bytes = [&](const Region& g) { return sender ? g.sender_bytes : g.receiver_bytes; };
  auto scale = [&](const Region& g) -> size_t { return g.content ? 1 : sender ? g.receiver_bytes : g.sender_bytes; };
  // Offsets are visited in increasing order (spans tile the text), so one forward walk maps them all.
  auto map = [&](size_t x) {
    while (k + 1 < regions.size() && x >= side_begin + side_bytes(regions[k])) {
      side_begin += side_bytes(regions[k]);
      common_begin += regions[k].common_bytes();
      ++k;
    }
    return common_begin + (x - side_begin) * scale(regions[k]);
  };
  for (size_t i = 0; i < t.size(); ++i) {
    out.begin[i] = map(t.begin[i]);
    out.end[i] = map(t.end[i]);
  }
  return out;
}

}  // namespace

Result<ChatContextAlignment> align_chat_contexts(const Tokenizer& sender, const Tokenizer& receiver,
                                                 std::span<const ChatMessage> messages,
                                                 std::span<const std::string> segments) {
  Rendering s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, render(sender, messages, segments));
  AGENTKV_ASSIGN_OR_RETURN(r, render(receiver, messages, segments));
  const std::vector<Region> g = regions(s.text, r.text, messages);
  ChatContextAlignment a;
  a.sender = on_axis(s.spans, g, true);
  a.receiver = on_axis(r.spans, g, false);
  return a;
}

}  // namespace agentkv
