// Whether one search method beats another on the same problems: a paired comparison of per-problem
// correctness (the methods saw the same problems and, for best-of-N, the same samples). Only the
// discordant problems (one right, the other wrong) carry information. Reports the accuracy difference
// with a 95% confidence interval (Wald on the paired differences, with Agresti–Min's +0.5 correction
// to each discordant count, so the interval does not collapse to a point at 0 or n discordant) and
// the exact two-sided McNemar p-value (binomial on the discordant problems). Own code: a handful of
// lines against pulling a statistics library into the lab.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agentkv::prm {

struct PairedAccuracy {
  int64_t n = 0;            // problems
  int64_t only_a = 0;       // a right, b wrong
  int64_t only_b = 0;       // b right, a wrong
  double difference = 0;    // accuracy of a minus accuracy of b
  double ci_low = 0, ci_high = 0;  // 95%
  double p_value = 1;       // exact two-sided McNemar
  // The interval excludes 0: a real difference at the 5% level.
  bool decided() const { return ci_low > 0 || ci_high < 0; }
};

// a and b: per problem, whether the method's answer is right; same length.
PairedAccuracy compare_paired(const std::vector<bool>& a, const std::vector<bool>& b);

// "+3.1 points [−2.0, +8.2] (only a 5, only b 2, McNemar p 0.45)".
std::string describe(const PairedAccuracy& c);

}  // namespace agentkv::prm
