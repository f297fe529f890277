// Phi-3 chat format (see tokenizer/chat_template.h), as Phi-3.5's template writes it: <|system|>,
// <|user|> and <|assistant|> turns, each "\n" CONTENT "<|end|>\n"; an empty system message is left out;
// the text ends with the generation prompt or, without one, the EOS token.
#include "tokenizer/chat_formats.h"

namespace agentkv::chat_formats {

RenderedChat render_phi3(std::span<const ChatMessage> msgs, bool gen, const std::string& eos) {
  RenderedChat r;
  for (const ChatMessage& m : msgs) {
    if ((m.role == "system" && m.content.empty()) ||
        (m.role != "system" && m.role != "user" && m.role != "assistant"))
      continue;
    r.text += "<|" + m.role + "|>\n";
    put_content(r, m.content);
    r.text += "<|end|>\n";
  }
  r.text += gen ? std::string("<|assistant|>\n") : eos;
  return r;
}

}  // namespace agentkv::chat_formats
