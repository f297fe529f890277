#include "util/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace agentkv {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(1, total)),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (!finished_) finish();
}

void ProgressBar::update(int64_t done, const std::string& detail) {
  done_ = std::clamp<int64_t>(done, 0, total_);
  detail_ = detail;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && done_ < total_) return;
    last_draw_ = now;
    draw(false);
  } else {
    const int decile = int(done_ * 10 / total_);
    if (decile == last_decile_) return;
    last_decile_ = decile;
    draw(false);
  }
}

void ProgressBar::finish(const std::string& detail) {
  if (finished_) return;
  finished_ = true;
  done_ = total_;
  if (!detail.empty()) detail_ = detail;
  if (enabled_) draw(true);
}

void ProgressBar::draw(bool final_line) {
  constexpr int kWidth = 28;
  const int filled = int(done_ * kWidth / total_);
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "%s%s [%s] %3d%% %6.1fs %s%s", tty_ ? "\r\033[K" : "", label_.c_str(), bar.c_str(),
               int(done_ * 100 / total_), secs, detail_.c_str(), (tty_ && !final_line) ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace agentkv
