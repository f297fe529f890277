#include "prm/step_probe.h"

#include <algorithm>
#include <cmath>

#include "util/status.h"

namespace agentkv::prm {

double sigmoid(double z) { return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z)); }
double softplus(double z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }

namespace {

// Solves A x = b for symmetric positive definite A ([m][m], overwritten by its Cholesky factor).
// Returns false when A is not positive definite (cannot happen with l2 > 0, checked anyway).
bool cholesky_solve(std::vector<double>& a, std::vector<double>& x, size_t m) {
  for (size_t j = 0; j < m; ++j) {
    double d = a[j * m + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * m + k] * a[j * m + k];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[j * m + j] = d;
    for (size_t i = j + 1; i < m; ++i) {
      double s = a[i * m + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * m + k] * a[j * m + k];
      a[i * m + j] = s / d;
    }
  }
  for (size_t i = 0; i < m; ++i) {  // L y = b
    double s = x[i];
    for (size_t k = 0; k < i; ++k) s -= a[i * m + k] * x[k];
    x[i] = s / a[i * m + i];
  }
  for (size_t i = m; i-- > 0;) {  // L^T x = y
    double s = x[i];
    for (size_t k = i + 1; k < m; ++k) s -= a[k * m + i] * x[k];
    x[i] = s / a[i * m + i];
  }
  return true;
}

}  // namespace

double StepProbe::apply(const float* f) const {
  double z = bias;
  for (size_t i = 0; i < weight.size(); ++i) z += weight[i] * (double(f[i]) - mean[i]) * inv_std[i];
  return z;
}

void rms_normalize_rows(float* x, int64_t n, int64_t d, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    float* row = x + r * d;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(row[i]) * row[i];
    const float scale = float(1 / std::sqrt(ss / double(d) + eps));
    for (int64_t i = 0; i < d; ++i) row[i] *= scale;
  }
}

std::vector<double> apply_probe(const StepProbe& probe, std::span<const float> features) {
  const size_t d = size_t(probe.n_features());
  AGENTKV_CHECK(d > 0 && features.size() % d == 0);
  std::vector<double> out;
  for (size_t r = 0; r < features.size() / d; ++r) out.push_back(probe.apply(features.data() + r * d));
  return out;
}

StepProbe fit_step_probe(std::span<const float> features, std::span<const int> labels, int layer, double l2) {
  const size_t n = labels.size();
  AGENTKV_CHECK(n > 0 && features.size() % n == 0 && l2 > 0);
  const size_t d = features.size() / n;
  StepProbe p;
  p.layer = layer;
  p.l2 = l2;
  p.mean.assign(d, 0);
  p.inv_std.assign(d, 1);
  p.weight.assign(d, 0);
  // Standardise with the train set's moments, so one l2 means the same for every feature.
  std::vector<double> mean(d, 0), var(d, 0);
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < d; ++i) mean[i] += features[r * d + i] / double(n);
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < d; ++i) var[i] += (features[r * d + i] - mean[i]) * (features[r * d + i] - mean[i]) / double(n);
  for (size_t i = 0; i < d; ++i) {
    p.mean[i] = float(mean[i]);
    p.inv_std[i] = float(1 / (std::sqrt(var[i]) + 1e-6));
  }
  // z carries a trailing 1 for the intercept.
  const size_t m = d + 1;
  std::vector<double> z(n * m);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < d; ++i) z[r * m + i] = (double(features[r * d + i]) - p.mean[i]) * p.inv_std[i];
    z[r * m + d] = 1;
  }
  const double pos = double(std::count_if(labels.begin(), labels.end(), [](int l) { return l != 0; }));
  const double rate = std::clamp((pos + 0.5) / (double(n) + 1), 1e-3, 1 - 1e-3);
  p.bias = std::log(rate / (1 - rate));
  if (pos == 0 || pos == double(n)) return p;
  std::vector<double> w(m, 0);
  w[d] = p.bias;
  auto loss = [&](const std::vector<double>& v) {
    double s = 0;
    for (size_t r = 0; r < n; ++r) {
      double t = 0;
      for (size_t i = 0; i < m; ++i) t += z[r * m + i] * v[i];
      s += labels[r] ? softplus(-t) : softplus(t);
    }
    double reg = 0;
    for (size_t i = 0; i < d; ++i) reg += v[i] * v[i];
    return s / double(n) + 0.5 * l2 * reg;
  };
  std::vector<double> hess(m * m), step(m);
  double current = loss(w);
  for (int iter = 0; iter < 50; ++iter) {
    std::fill(hess.begin(), hess.end(), 0.0);
    std::fill(step.begin(), step.end(), 0.0);
    for (size_t r = 0; r < n; ++r) {
      const double* zr = &z[r * m];
      double t = 0;
      for (size_t i = 0; i < m; ++i) t += zr[i] * w[i];
      const double prob = sigmoid(t);
      const double g = (prob - (labels[r] ? 1.0 : 0.0)) / double(n);
      const double h = prob * (1 - prob) / double(n);
      for (size_t i = 0; i < m; ++i) {
        step[i] += g * zr[i];
        const double hz = h * zr[i];
        for (size_t k = 0; k <= i; ++k) hess[i * m + k] += hz * zr[k];  // lower triangle
      }
    }
    for (size_t i = 0; i < d; ++i) {
      step[i] += l2 * w[i];
      hess[i * m + i] += l2;
    }
    hess[d * m + d] += 1e-9;  // the intercept's curvature can vanish when every p saturates
    if (!cholesky_solve(hess, step, m)) break;
    // Halve the Newton step until the loss does not rise.
    std::vector<double> next(m);
    double after = current;
    for (int h = 0; h < 30; ++h) {
      for (size_t i = 0; i < m; ++i) next[i] = w[i] - step[i];
      after = loss(next);
      if (after <= current) break;
      for (double& s : step) s /= 2;
    }
    if (after > current) break;
    const double gain = current - after;
    w = next;
    current = after;
    if (gain < 1e-12) break;
  }
  for (size_t i = 0; i < d; ++i) p.weight[i] = w[i];
  p.bias = w[d];
  return p;
}

}  // namespace agentkv::prm
