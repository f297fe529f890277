#include "engine/engine_metrics.h"

#include <algorithm>

namespace agentkv {

LatencyHistogram::LatencyHistogram()
    : bounds_{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
      counts_(bounds_.size() + 1, 0) {}

void LatencyHistogram::observe(double seconds) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  ++counts_[i];
  ++count_;
  sum_ += seconds;
}

}  // namespace agentkv
