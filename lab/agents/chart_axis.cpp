#include "chart_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace agentkv {

int AxisScale::intervals() const { return static_cast<int>(std::lround((hi - lo) / step)); }

AxisScale nice_axis(double data_lo, double data_hi, int target_intervals) {
  double lo = std::min(data_lo, data_hi), hi = std::max(data_lo, data_hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    if (lo == 0) {
      hi = pad;
    } else {
      lo -= pad;
      hi += pad;
    }
  }
  // Divide before subtracting so opposite-signed extremes cannot overflow.
  const double raw = hi / target_intervals - lo / target_intervals;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  constexpr double kSlack = 1e-9;  // 0.2 / 0.1 may land a hair above 2
  const double multiplier = normalized <= 1 + kSlack   ? 1
                            : normalized <= 2 + kSlack ? 2
                            : normalized <= 5 + kSlack ? 5
                                                       : 10;
  AxisScale axis;
  axis.step = multiplier * magnitude;
  axis.lo = std::floor(lo / axis.step + kSlack) * axis.step;
  axis.hi = std::ceil(hi / axis.step - kSlack) * axis.step;
  if (axis.hi <= axis.lo) axis.hi = axis.lo + axis.step;
  return axis;
}

namespace {

std::string format_scaled(double value, double resolution) {
  constexpr struct {
    double divisor;
    const char* suffix;
  } kUnits[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}};
  if (value == 0) return "0";
  const double magnitude = std::abs(value) * (1 + 1e-9);  // 999.9999999 is a rounding error of 1000
  char buf[64];
  if (magnitude >= 1e15 || magnitude < 1e-6) {
    std::snprintf(buf, sizeof(buf), "%.3g", value);
    return buf;
  }
  auto unit = std::find_if(std::begin(kUnits), std::end(kUnits),
                           [&](const auto& u) { return magnitude >= u.divisor; });
  if (unit == std::end(kUnits)) unit = std::end(kUnits) - 1;
  const double scaled_resolution = resolution / unit->divisor;
  const int decimals =
      scaled_resolution >= 1
          ? 0
          : std::clamp(static_cast<int>(std::ceil(-std::log10(scaled_resolution) - 1e-9)), 0, 9);
  int n = std::snprintf(buf, sizeof(buf), "%.*f", decimals, value / unit->divisor);
  if (decimals > 0) {  // drop trailing zeros, then a bare decimal point
    while (buf[n - 1] == '0') --n;
    if (buf[n - 1] == '.') --n;
  }
  std::string s(buf, static_cast<size_t>(n));
  if (s == "-0") return "0";
  return s + unit->suffix;
}

}  // namespace

std::string format_tick(double value, double step) {
  if (std::abs(value) < std::abs(step) * 1e-6) value = 0;  // lo + i * step can miss zero by an ulp
  return format_scaled(value, step);
}

std::string format_value(double value) {
  if (value == 0 || !std::isfinite(value)) return format_scaled(value, 1);
  return format_scaled(value, std::pow(10.0, std::floor(std::log10(std::abs(value))) - 2));
}

}  // namespace agentkv
