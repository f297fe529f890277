#include "engine/text_stream.h"

#include <algorithm>

namespace agentkv {

size_t complete_utf8_prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte and check its length.
  size_t n = s.size();
  size_t i = n;
  int cont = 0;
  while (i > 0 && cont < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++cont;
  }
  if (i == 0) return n;
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  int need = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
  return (cont + 1 < need) ? i - 1 : n;
}

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop) : tok_(tok), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(int32_t token) {
  if (stopped_) return {};
  const size_t before = text_.size();
  text_ += tok_.token_to_piece(token, false);
  // Stop strings: a new occurrence must overlap the appended piece.
  size_t cut = std::string::npos;
  for (auto& s : stop_) {
    const size_t from = before > s.size() ? before - s.size() + 1 : 0;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    text_.resize(std::max(cut, emitted_));
    stopped_ = true;
  }
  // Release what is complete UTF-8 and cannot be the start of a stop string: hold back the longest
  // end of the text that begins some stop string.
  size_t safe = stopped_ ? text_.size() : complete_utf8_prefix(text_);
  if (!stopped_) {
    size_t hold = 0;
    for (const std::string& st : stop_)
      for (size_t k = std::min(st.size() - 1, text_.size()); k > hold; --k)
        if (text_.compare(text_.size() - k, k, st, 0, k) == 0) {
          hold = k;
          break;
        }
    safe = std::min(safe, text_.size() - hold);
  }
  if (safe <= emitted_) return {};
  std::string out = text_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  return out;
}

void TextStream::add_stop(std::string stop) {
  if (stop.empty()) return;
  stop_.push_back(std::move(stop));
}

std::string TextStream::finish() {
  if (text_.size() <= emitted_) return {};
  std::string out = text_.substr(emitted_);
  emitted_ = text_.size();
  return out;
}

}  // namespace agentkv
