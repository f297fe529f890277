#include "server/agent_context.h"

namespace agentkv {

Result<std::vector<int32_t>> agent_context_tokens(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt) {
  std::string text;
  if (detect_chat_format(tok) == ChatFormat::kGemma) {
    std::vector<ChatMessage> merged;
    for (const ChatMessage& m : messages) {
      if (!merged.empty() && merged.back().role == m.role && m.role != "system")
        merged.back().content += "\n\n" + m.content;
      else
        merged.push_back(m);
    }
    if (merged.size() == 1 && merged[0].role == "system" && !add_generation_prompt) {
      text = "<start_of_turn>user\n" + merged[0].content + "\n\n";
    } else {
      AGENTKV_ASSIGN_OR_RETURN(text, apply_chat_template(tok, merged, add_generation_prompt));
    }
  } else {
    AGENTKV_ASSIGN_OR_RETURN(text, apply_chat_template(tok, messages, add_generation_prompt));
  }
  return tok.encode(text, tok.add_bos_default(), true);
}

}  // namespace agentkv
