#include "lab/prm/calibration_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "prm/step_probe.h"
#include "util/status.h"

namespace agentkv::prm {

double log_loss(const Calibration& c, std::span<const float> x, std::span<const int> label) {
  AGENTKV_CHECK(x.size() == label.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double z = c.apply(x[i]);
    sum += label[i] ? softplus(-z) : softplus(z);
  }
  return x.empty() ? 0 : sum / double(x.size());
}

Calibration fit_logistic(std::span<const float> x, std::span<const int> label, double l2) {
  AGENTKV_CHECK(x.size() == label.size());
  const double n = double(x.size());
  const double pos = double(std::count_if(label.begin(), label.end(), [](int l) { return l != 0; }));
  Calibration c;
  c.a = 0;
  // Start from the base rate, clamped so a single class does not give an infinite intercept.
  const double rate = std::clamp((pos + 0.5) / (n + 1), 1e-3, 1 - 1e-3);
  c.b = std::log(rate / (1 - rate));
  if (pos == 0 || pos == n) return c;
  for (int iter = 0; iter < 100; ++iter) {
    // Gradient and Hessian of the mean loss in (a, b).
    double ga = l2 * c.a, gb = 0, haa = l2, hab = 0, hbb = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double p = sigmoid(c.apply(x[i]));
      const double r = p - (label[i] ? 1.0 : 0.0);
      const double w = p * (1 - p);
      ga += r * x[i] / n;
      gb += r / n;
      haa += w * x[i] * x[i] / n;
      hab += w * x[i] / n;
      hbb += w / n;
    }
    const double det = haa * hbb - hab * hab;
    if (!(det > 1e-18)) break;
    double da = (hbb * ga - hab * gb) / det;
    double db = (haa * gb - hab * ga) / det;
    // Halve the Newton step until the loss does not rise (Newton can overshoot far from the optimum).
    const double before = log_loss(c, x, label) + 0.5 * l2 * c.a * c.a;
    Calibration next = c;
    for (int h = 0; h < 30; ++h) {
      next.a = c.a - da;
      next.b = c.b - db;
      if (log_loss(next, x, label) + 0.5 * l2 * next.a * next.a <= before) break;
      da /= 2;
      db /= 2;
    }
    c = next;
    if (std::fabs(da) + std::fabs(db) < 1e-10) break;
  }
  return c;
}

double auroc(std::span<const double> score, std::span<const int> label) {
  AGENTKV_CHECK(score.size() == label.size());
  std::vector<size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return score[i] < score[j]; });
  // Mann-Whitney U: sum of the positives' ranks, tied scores sharing their mean rank.
  double rank_sum = 0, n_pos = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && score[order[j]] == score[order[i]]) ++j;
    const double mean_rank = double(i + j + 1) / 2;  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k)
      if (label[order[k]]) rank_sum += mean_rank, n_pos += 1;
    i = j;
  }
  const double n_neg = double(score.size()) - n_pos;
  if (n_pos == 0 || n_neg == 0) return std::numeric_limits<double>::quiet_NaN();
  return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg);
}

double within_group_auroc(std::span<const double> score, std::span<const int> label, std::span<const size_t> group,
                          int64_t* n_pairs) {
  AGENTKV_CHECK(score.size() == label.size() && score.size() == group.size());
  std::vector<size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return group[i] < group[j]; });
  double right = 0, pairs = 0;
  for (size_t g0 = 0; g0 < order.size();) {
    size_t g1 = g0;
    while (g1 < order.size() && group[order[g1]] == group[order[g0]]) ++g1;
    for (size_t a = g0; a < g1; ++a) {
      if (!label[order[a]]) continue;
      for (size_t b = g0; b < g1; ++b) {
        if (label[order[b]]) continue;
        const double sp = score[order[a]], sn = score[order[b]];
        right += sp > sn ? 1.0 : sp == sn ? 0.5 : 0.0;
        pairs += 1;
      }
    }
    g0 = g1;
  }
  if (n_pairs) *n_pairs = int64_t(pairs);
  return pairs > 0 ? right / pairs : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace agentkv::prm
