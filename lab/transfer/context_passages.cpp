#include "lab/transfer/context_passages.h"

namespace agentkv {

namespace {

// Cut at the last space at or before n bytes, so both parts are whole words.
size_t space_before(const std::string& s, size_t n) {
  if (n >= s.size()) return s.size();
  const size_t sp = s.rfind(' ', n);
  return sp == std::string::npos ? n : sp;
}

}  // namespace

std::vector<ContextPassage> context_passages(const std::string& text, size_t context_bytes, size_t continuation_bytes,
                                             size_t max_passages) {
  std::vector<ContextPassage> out;
  for (size_t at = 0; at < text.size() && (max_passages == 0 || out.size() < max_passages);) {
    size_t end = text.find("\n\n", at);
    if (end == std::string::npos) end = text.size();
    const std::string passage = text.substr(at, end - at);
    at = end + 2;
    const size_t cut = space_before(passage, context_bytes);
    if (cut + 2 * continuation_bytes / 3 > passage.size()) continue;  // too short for a real continuation
    const std::string rest = passage.substr(cut);
    out.push_back(ContextPassage{passage.substr(0, cut), rest.substr(0, space_before(rest, continuation_bytes))});
  }
  return out;
}

}  // namespace agentkv
