// Held-out (or fitting) passages cut into a context and the continuation after it, as
// transfer-quality scores them and refine-transfer trains on them: passages are separated by blank
// lines; each gives a context of at most context_bytes and a continuation of at most
// continuation_bytes, both cut at a space so they are whole words. A passage too short for a real
// continuation (under two thirds of continuation_bytes after the context) is skipped.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace agentkv {

struct ContextPassage {
  std::string context, continuation;
};

// At most max_passages (0: all).
std::vector<ContextPassage> context_passages(const std::string& text, size_t context_bytes, size_t continuation_bytes,
                                             size_t max_passages);

}  // namespace agentkv
