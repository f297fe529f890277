#include "lab/prm/paired_accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/status.h"

namespace agentkv::prm {
namespace {

// P(X <= k) for X ~ Binomial(n, 1/2), in logs so that n in the thousands does not underflow.
double binomial_half_cdf(int64_t k, int64_t n) {
  double total = 0;
  for (int64_t i = 0; i <= k; ++i)
    total += std::exp(std::lgamma(double(n) + 1) - std::lgamma(double(i) + 1) - std::lgamma(double(n - i) + 1) -
                      double(n) * std::log(2.0));
  return std::min(1.0, total);
}

}  // namespace

PairedAccuracy compare_paired(const std::vector<bool>& a, const std::vector<bool>& b) {
  AGENTKV_CHECK(a.size() == b.size());
  PairedAccuracy c;
  c.n = int64_t(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    c.only_a += a[i] && !b[i];
    c.only_b += !a[i] && b[i];
  }
  if (c.n == 0) return c;
  const double n = double(c.n);
  c.difference = double(c.only_a - c.only_b) / n;
  // Agresti & Min (2005): add 0.5 to each discordant cell; the variance of the paired difference.
  const double n10 = double(c.only_a) + 0.5, n01 = double(c.only_b) + 0.5, m = n + 2.0;
  const double d = (n10 - n01) / m;
  const double var = ((n10 + n01) / m - d * d) / m;
  const double half = 1.959963984540054 * std::sqrt(std::max(0.0, var));
  c.ci_low = std::max(-1.0, d - half);
  c.ci_high = std::min(1.0, d + half);
  const int64_t discordant = c.only_a + c.only_b;
  c.p_value = discordant == 0 ? 1.0 : std::min(1.0, 2.0 * binomial_half_cdf(std::min(c.only_a, c.only_b), discordant));
  return c;
}

std::string describe(const PairedAccuracy& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%+.1f points [%+.1f, %+.1f] (only this right %lld, only that right %lld, McNemar p %.3g)",
                100 * c.difference, 100 * c.ci_low, 100 * c.ci_high, (long long)c.only_a, (long long)c.only_b,
                c.p_value);
  return buf;
}

}  // namespace agentkv::prm
