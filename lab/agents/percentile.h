// Nearest-rank percentiles for benchmark reports (TTFT, latency).
#pragma once

#include <vector>

namespace agentkv {

// The smallest sample with at least q (0..1) of the samples at or below it; 0 for no samples.
double percentile(std::vector<double> samples, double q);

}  // namespace agentkv
