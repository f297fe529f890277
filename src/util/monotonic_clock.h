// Seconds on the monotonic clock, for measuring intervals (latencies, phase timings); not wall time.
#pragma once

#include <chrono>

namespace agentkv {

inline double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace agentkv
