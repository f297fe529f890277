// excerpt(): how an error message quotes text it was given (a model name, a key, an agent id, a
// parser's last-read token). Client text can be megabytes; an error echoes a bounded excerpt of it,
// so a reply or a log line never grows with the input. The one helper for every such quote.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentkv {

// `text` itself when it has at most max_bytes bytes, else its first max_bytes bytes (cut back to a
// UTF-8 character boundary) followed by "…(N bytes)", N the whole text's length.
inline std::string excerpt(std::string_view text, size_t max_bytes = 64) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  return std::string(text.substr(0, cut)) + "\xE2\x80\xA6(" + std::to_string(text.size()) + " bytes)";
}

}  // namespace agentkv
