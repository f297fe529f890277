// A progress bar on stderr for long jobs (bench-agents, fit-transfer). On a terminal it redraws one
// line; otherwise (CI logs) it prints a line only at each 10% and at the end, so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace agentkv {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  ~ProgressBar();
  void update(int64_t done, const std::string& detail = "");
  void finish(const std::string& detail = "");

 private:
  void draw(bool final_line);
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  std::string detail_;
  bool enabled_;
  bool tty_;
  bool finished_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace agentkv
