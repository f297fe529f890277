#include "server/agent_context.h"

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

Result<AgentContextTokens> agent_context_pieces(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                               std::span<const std::string> segments, bool add_generation_prompt) {
  std::string text;
  AGENTKV_ASSIGN_OR_RETURN(text, render(tok, messages, add_generation_prompt));
  AgentContextTokens out;
  size_t done = 0;  // text before this is tokenized
  bool first = true;
  auto append = [&](std::string_view piece, bool special) {
    const std::vector<int32_t> t = tok.encode(piece, first && tok.add_bos_default(), special);
    first = false;
    out.tokens.insert(out.tokens.end(), t.begin(), t.end());
  };
  for (const std::string& seg : segments) {
    if (seg.empty()) continue;
    const size_t at = text.find(seg, done);
    if (at == std::string::npos) continue;
    append(std::string_view(text).substr(done, at - done), true);
    done = at;
    const int64_t first = int64_t(out.tokens.size());
    append(seg, false);
    out.segments.emplace_back(first, int64_t(out.tokens.size()));
    done = at + seg.size();
  }
  append(std::string_view(text).substr(done), true);
  return out;
}

}  // namespace agentkv
