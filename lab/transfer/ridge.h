// Closed-form ridge regression in double: accumulate the normal equations X'X and X'Y row by row,
// then solve (X'X + lambda I) W = X'Y by Cholesky. Small dense problems (a few hundred features),
// so a plain factorisation is both exact enough and fast; no external BLAS/LAPACK.
#pragma once

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace agentkv {

// X'X of rows with n_in features. Only the upper triangle is accumulated (the matrix is symmetric).
class GramAccumulator {
 public:
  explicit GramAccumulator(int n_in) : n_in_(n_in), g_(size_t(n_in) * size_t(n_in), 0.0) {}
  // n rows of x, each n_in floats, row-major.
  void add(const float* x, int64_t n);
  int n_in() const { return n_in_; }
  int64_t n_rows() const { return n_rows_; }
  // The full symmetric matrix.
  std::vector<double> matrix() const;

 private:
  int n_in_;
  int64_t n_rows_ = 0;
  std::vector<double> g_;
};

// X'Y for rows x (n_in) and targets y (n_out).
class CrossAccumulator {
 public:
  CrossAccumulator(int n_in, int n_out) : n_in_(n_in), n_out_(n_out), b_(size_t(n_in) * size_t(n_out), 0.0) {}
  void add(const float* x, const float* y, int64_t n);
  const std::vector<double>& matrix() const { return b_; }
  int n_out() const { return n_out_; }

 private:
  int n_in_, n_out_;
  std::vector<double> b_;
};

// In place: a (n x n, symmetric positive definite) becomes its lower Cholesky factor L.
// Fails naming the pivot when a is not positive definite.
Status cholesky_factor(std::vector<double>& a, int n);

// W = (G + alpha diag(G) + eps I)^-1 B: the ridge penalty of each feature scales with its energy,
// so alpha is independent of the features' scales (eps = 1e-9 * mean diagonal, for PD-ness). G is n x n, B n x m; W is returned row-major n x m, in float.
Result<std::vector<float>> ridge_solve(std::vector<double> g, const std::vector<double>& b, int n, int m, double alpha);

// ||Y - XW||^2 of rows known only by their moments G = X'X (n x n), B = X'Y (n x m) and yy = ||Y||^2:
// tr(W'GW) - 2 tr(W'B) + yy, so a held-out set is scored without keeping its rows. W is n x m
// row-major, as ridge_solve returns it.
double squared_error_from_moments(const std::vector<float>& w, const std::vector<double>& g, const std::vector<double>& b,
                                  double yy, int n, int m);

}  // namespace agentkv
