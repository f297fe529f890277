#include <cstdio>
#include <sstream>

#include "cli/commands.h"

namespace agentkv {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int cli_fail(const std::string& msg) {
  // One line, whatever the message holds.
  std::string line = msg;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "agentkv: error: %s\n", line.c_str());
  return 1;
}

}  // namespace agentkv
