#include "lab/transfer/ridge.h"

#include <cmath>
#include <string>

namespace agentkv {

void GramAccumulator::add(const float* x, int64_t n) {
  const size_t d = size_t(n_in_);
  std::vector<double> row(d);
  for (int64_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < d; ++i) row[i] = double(x[size_t(t) * d + i]);
    // Outer-product update written as row axpys (no reduction), so the compiler vectorises it.
    for (size_t i = 0; i < d; ++i) {
      const double xi = row[i];
      if (xi == 0.0) continue;
      double* gi = g_.data() + i * d;
      for (size_t j = i; j < d; ++j) gi[j] += xi * row[j];
    }
  }
  n_rows_ += n;
}

std::vector<double> GramAccumulator::matrix() const {
  const size_t d = size_t(n_in_);
  std::vector<double> full(g_);
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < i; ++j) full[i * d + j] = g_[j * d + i];
  return full;
}

void CrossAccumulator::add(const float* x, const float* y, int64_t n) {
  const size_t d = size_t(n_in_), m = size_t(n_out_);
  std::vector<double> yrow(m);
  for (int64_t t = 0; t < n; ++t) {
    for (size_t j = 0; j < m; ++j) yrow[j] = double(y[size_t(t) * m + j]);
    for (size_t i = 0; i < d; ++i) {
      const double xi = double(x[size_t(t) * d + i]);
      if (xi == 0.0) continue;
      double* bi = b_.data() + i * m;
      for (size_t j = 0; j < m; ++j) bi[j] += xi * yrow[j];
    }
  }
}

Status cholesky_factor(std::vector<double>& a, int n) {
  const size_t N = size_t(n);
  for (size_t j = 0; j < N; ++j) {
    double diag = a[j * N + j];
    for (size_t k = 0; k < j; ++k) diag -= a[j * N + k] * a[j * N + k];
    if (!(diag > 0.0))
      return make_error("cholesky: matrix is not positive definite at pivot " + std::to_string(j));
    const double ljj = std::sqrt(diag);
    a[j * N + j] = ljj;
    for (size_t i = j + 1; i < N; ++i) {
      double s = a[i * N + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * N + k] * a[j * N + k];
      a[i * N + j] = s / ljj;
    }
    for (size_t i = 0; i < j; ++i) a[i * N + j] = 0.0;  // upper part is not part of L
  }
  return Status::ok_status();
}

Result<std::vector<float>> ridge_solve(std::vector<double> g, const std::vector<double>& b, int n, int m, double alpha) {
  const size_t N = size_t(n), M = size_t(m);
  if (g.size() != N * N || b.size() != N * M) return make_error("ridge_solve: matrix sizes do not match n and m");
  double trace = 0;
  for (size_t i = 0; i < N; ++i) trace += g[i * N + i];
  // Each feature is penalised in proportion to its own energy (ridge on standardised features):
  // K and V of one layer differ in scale by orders of magnitude, and a single lambda would shrink
  // the small ones to nothing. The tiny uniform term keeps never-active features solvable.
  const double floor = 1e-9 * (trace > 0 ? trace / double(n) : 1.0);
  for (size_t i = 0; i < N; ++i) g[i * N + i] += alpha * g[i * N + i] + floor;
  AGENTKV_TRY(cholesky_factor(g, n));
  // L L' W = B: forward then backward substitution, all m right-hand sides at once.
  std::vector<double> w(b);
  for (size_t i = 0; i < N; ++i) {
    double* wi = w.data() + i * M;
    for (size_t k = 0; k < i; ++k) {
      const double l = g[i * N + k];
      const double* wk = w.data() + k * M;
      for (size_t j = 0; j < M; ++j) wi[j] -= l * wk[j];
    }
    for (size_t j = 0; j < M; ++j) wi[j] /= g[i * N + i];
  }
  for (size_t ii = N; ii-- > 0;) {
    double* wi = w.data() + ii * M;
    for (size_t k = ii + 1; k < N; ++k) {
      const double l = g[k * N + ii];
      const double* wk = w.data() + k * M;
      for (size_t j = 0; j < M; ++j) wi[j] -= l * wk[j];
    }
    for (size_t j = 0; j < M; ++j) wi[j] /= g[ii * N + ii];
  }
  return std::vector<float>(w.begin(), w.end());
}

double squared_error_from_moments(const std::vector<float>& w, const std::vector<double>& g, const std::vector<double>& b,
                             double yy, int n, int m) {
  double quad = 0, cross = 0;
  std::vector<double> gw(static_cast<size_t>(m));
  for (int i = 0; i < n; ++i) {
    std::fill(gw.begin(), gw.end(), 0.0);
    for (int k = 0; k < n; ++k) {
      const double gik = g[size_t(i) * n + k];
      if (gik == 0.0) continue;
      const float* wk = &w[size_t(k) * m];
      for (int j = 0; j < m; ++j) gw[size_t(j)] += gik * double(wk[j]);
    }
    const float* wi = &w[size_t(i) * m];
    for (int j = 0; j < m; ++j) {
      quad += double(wi[j]) * gw[size_t(j)];
      cross += double(wi[j]) * b[size_t(i) * m + j];
    }
  }
  return quad - 2 * cross + yy;
}

}  // namespace agentkv
