// Calibration and evaluation text for the KV-transfer tests: the King James Version as Debian's
// bible-kjv package ships it (public domain; the `bible` program reads the package's
// /usr/lib/bible.data), read at test time, never committed. Splits are by book, so no evaluation
// verse is ever seen in fitting: fit on Exodus, evaluate on the Gospel of John (Genesis is kept for
// the perplexity goldens). scripts/make_transfer_corpus.sh writes the same passages to a file for
// `agentkv fit-transfer`.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace agentkv::testing {

// One passage per chapter: the chapter's verses joined by spaces, verse references stripped.
// book is the `bible` abbreviation ("ex", "joh"). Fails the test when the package is missing.
inline std::vector<std::string> kjv_chapters(const std::string& book, int first_chapter, int last_chapter) {
  std::vector<std::string> out;
  for (int ch = first_chapter; ch <= last_chapter; ++ch) {
    const std::string cmd = "bible -f '" + book + std::to_string(ch) + ":1-" + book + std::to_string(ch) + ":999' 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
      ADD_FAILURE() << "cannot run `bible` (Debian package bible-kjv, installed by scripts/setup.sh)";
      return out;
    }
    std::string text, line;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) {
      line = buf;
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      // "Exo3:14 And God said ..." → the text after the reference.
      const size_t colon = line.find(':');
      const size_t space = line.find(' ');
      if (colon == std::string::npos || space == std::string::npos || space < colon) continue;
      if (!text.empty()) text += ' ';
      text += line.substr(space + 1);
    }
    const int rc = pclose(p);
    if (rc != 0 || text.empty()) {
      ADD_FAILURE() << "`bible` gave no text for " << book << ch << " (is the Debian package bible-kjv installed?)";
      return out;
    }
    out.push_back(text);
  }
  return out;
}

// Cuts a passage to at most max_bytes, at a space, so test sequences stay short.
inline std::string cut_at_space(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  const size_t sp = s.rfind(' ', max_bytes);
  return s.substr(0, sp == std::string::npos ? max_bytes : sp);
}

}  // namespace agentkv::testing
