// Turns generated tokens into text that is safe to show: complete UTF-8 only, cut at the first stop
// string, and never showing the start of a stop string that may still complete. One per sequence.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace agentkv {

// Length of the longest prefix of s that is complete UTF-8 (an incomplete trailing sequence is held back).
size_t complete_utf8_prefix(std::string_view s);

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop);

  // Appends a token's text. Returns the newly releasable text (maybe empty); stopped() turns true
  // when a stop string appeared (the text is cut before it).
  std::string push(int32_t token);
  // At the end of the sequence: whatever was held back.
  std::string finish();
  bool stopped() const { return stopped_; }
  // A stop string from now on (one that must appear after the text so far).
  void add_stop(std::string stop);
  const std::string& text() const { return text_; }

 private:
  const Tokenizer& tok_;
  std::vector<std::string> stop_;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace agentkv
