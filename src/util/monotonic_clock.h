// Seconds on the monotonic clock, for measuring intervals (latencies, phase timings); not wall time.
#pragma once

#include <chrono>

namespace agentkv {

inline double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace agentkv
