// The piece tokenization of a turn and an agent's chat-templated context (share/turn_pieces.h).
#include "share/turn_pieces.h"

namespace agentkv {

namespace {

Result<std::string> render(const Tokenizer& tok, std::span<const ChatMessage> messages, bool add_generation_prompt) {
  if (detect_chat_format(tok) != ChatFormat::kGemma) return apply_chat_template(tok, messages, add_generation_prompt);
  std::vector<ChatMessage> merged;
  for (const ChatMessage& m : messages) {
    if (!merged.empty() && merged.back().role == m.role && m.role != "system")
      merged.back().content += "\n\n" + m.content;
    else
      merged.push_back(m);
  }
  if (merged.size() == 1 && merged[0].role == "system" && !add_generation_prompt)
    return "<start_of_turn>user\n" + merged[0].content + "\n\n";
  return apply_chat_template(tok, merged, add_generation_prompt);
}

}  // namespace

AgentContextTokens tokenize_pieces(const Tokenizer& tok, std::string_view text,
                                   std::span<const std::pair<size_t, size_t>> segments, bool parse_special) {
  AgentContextTokens out;
  bool first = true;
  auto append = [&](std::string_view piece, bool special) {
    const std::vector<int32_t> t = tok.encode(piece, first && tok.add_bos_default(), special);
    first = false;
    out.tokens.insert(out.tokens.end(), t.begin(), t.end());
  };
  size_t done = 0;  // text before this is tokenized
  for (const auto& [at, end] : segments) {
    append(text.substr(done, at - done), parse_special);
    const int64_t begin = int64_t(out.tokens.size());
    append(text.substr(at, end - at), false);
    out.segments.emplace_back(begin, int64_t(out.tokens.size()));
    done = end;
  }
  append(text.substr(done), parse_special);
  return out;
}

Result<AgentContextTokens> agent_context_pieces(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                               std::span<const std::string> segments, bool add_generation_prompt) {
  std::string text;
  AGENTKV_ASSIGN_OR_RETURN(text, render(tok, messages, add_generation_prompt));
  std::vector<std::pair<size_t, size_t>> found;
  size_t done = 0;
  for (const std::string& seg : segments) {
    if (seg.empty()) continue;
    const size_t at = text.find(seg, done);
    if (at == std::string::npos) continue;
    found.emplace_back(at, at + seg.size());
    done = at + seg.size();
  }
  return tokenize_pieces(tok, text, found, true);
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
