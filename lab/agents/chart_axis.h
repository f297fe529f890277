// Value axes for charts: round tick values in 1-2-5 steps and compact tick labels ("1.2k", "3.5M").
#pragma once

#include <string>

namespace agentkv {

struct AxisScale {
  double lo = 0;          // first tick, a multiple of step, <= the data minimum
  double hi = 1;          // last tick, a multiple of step, >= the data maximum
  double step = 1;        // 1, 2 or 5 times a power of ten
  int intervals() const;  // number of steps from lo to hi
};

// Round bounds covering [data_lo, data_hi] in about target_intervals steps. An empty range is
// widened (to [0, 1] for all zeros) so the axis always has a positive span.
AxisScale nice_axis(double data_lo, double data_hi, int target_intervals = 5);

// Compact label for a value on a grid of `step`: enough decimals to tell neighbouring ticks apart,
// thousands as k / M / G / T, trailing zeros dropped (1200 -> "1.2k", 0.25 -> "0.25", 1000 -> "1k").
std::string format_tick(double value, double step);

// Compact label with three significant digits, for values that sit on no grid (bar annotations).
std::string format_value(double value);

}  // namespace agentkv
