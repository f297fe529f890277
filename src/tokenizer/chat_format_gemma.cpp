// Gemma chat format, Gemma 2 and 3 (see tokenizer/chat_template.h).
#include "tokenizer/chat_formats.h"

namespace agentkv::chat_formats {

Result<RenderedChat> render_gemma(std::span<const ChatMessage> msgs, bool gen) {
  std::string_view system;  // Gemma has no system role: its content opens the first turn
  const bool has_system = !msgs.empty() && msgs[0].role == "system";
  if (has_system) {
    system = msgs[0].content;
    msgs = msgs.subspan(1);
  }
  RenderedChat r;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if ((m.role == "user") != (i % 2 == 0)) {
      return make_error("chat template: Gemma conversations must alternate user/assistant, got '" + m.role +
                        "' at turn " + std::to_string(i));
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    r.text += "<start_of_turn>" + role + "\n";
    if (i == 0 && has_system) {
      put_content(r, system);
      r.text += "\n\n";
    }
    put_content(r, trim(m.content));
    r.text += "<end_of_turn>\n";
  }
  if (gen) r.text += "<start_of_turn>model\n";
  return r;
}

}  // namespace agentkv::chat_formats
