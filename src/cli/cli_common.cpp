#include <cstdio>

#include "cli/commands.h"

namespace agentkv {

int cli_fail(const std::string& msg) {
  // One line, whatever the message holds.
  std::string line = msg;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "agentkv: error: %s\n", line.c_str());
  return 1;
}

}  // namespace agentkv
