// The ridge solver against known answers: Cholesky of a hand-made SPD matrix, exact recovery of a
// random linear map (with bias) from noiseless rows, and shrinkage growing with alpha.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lab/transfer/ridge.h"

namespace agentkv {
namespace {

TEST(TransferRidge, CholeskyOfKnownMatrix) {
  // A = L L' with L = [[2,0,0],[1,3,0],[-1,2,1]].
  std::vector<double> a = {4, 2, -2, 2, 10, 5, -2, 5, 6};
  ASSERT_TRUE(cholesky_factor(a, 3).ok());
  const std::vector<double> l = {2, 0, 0, 1, 3, 0, -1, 2, 1};
  for (size_t i = 0; i < 9; ++i) EXPECT_NEAR(a[i], l[i], 1e-12) << i;
  std::vector<double> bad = {1, 2, 2, 1};
  const Status st = cholesky_factor(bad, 2);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error().find("pivot 1"), std::string::npos) << st.error();
}

TEST(TransferRidge, RecoversLinearMapWithBias) {
  const int d = 12, m = 5, n = 400;
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> w(size_t((d + 1) * m));
  for (float& v : w) v = g(rng);
  std::vector<float> x(size_t(n * (d + 1))), y(size_t(n * m), 0.0f);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < d; ++i) x[size_t(t * (d + 1) + i)] = g(rng) * float(i + 1);  // uneven scales
    x[size_t(t * (d + 1) + d)] = 1.0f;
    for (int j = 0; j < m; ++j)
      for (int i = 0; i <= d; ++i) y[size_t(t * m + j)] += x[size_t(t * (d + 1) + i)] * w[size_t(i * m + j)];
  }
  GramAccumulator gram(d + 1);
  CrossAccumulator cross(d + 1, m);
  // In two chunks: accumulation must not depend on how rows are batched.
  gram.add(x.data(), 150);
  gram.add(x.data() + 150 * (d + 1), n - 150);
  cross.add(x.data(), y.data(), 150);
  cross.add(x.data() + 150 * (d + 1), y.data() + 150 * m, n - 150);
  EXPECT_EQ(gram.n_rows(), n);
  auto fit = ridge_solve(gram.matrix(), cross.matrix(), d + 1, m, 1e-10);
  ASSERT_TRUE(fit.ok()) << fit.error();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR((*fit)[i], w[i], 1e-4) << i;
  // Strong regularisation shrinks the weights.
  auto shrunk = ridge_solve(gram.matrix(), cross.matrix(), d + 1, m, 10.0);
  ASSERT_TRUE(shrunk.ok());
  double n_fit = 0, n_shrunk = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    n_fit += double((*fit)[i]) * (*fit)[i];
    n_shrunk += double((*shrunk)[i]) * (*shrunk)[i];
  }
  EXPECT_LT(n_shrunk, 0.5 * n_fit);
}

// The held-out error from moments equals the sum of squared residuals computed row by row, for a
// map that does not fit the rows exactly.
TEST(TransferRidge, SquaredErrorFromMomentsEqualsResiduals) {
  const int n_in = 6, m = 3, rows = 50;
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * n_in)), y(size_t(rows * m)), w(size_t(n_in * m));
  for (float& v : x) v = g(rng);
  for (float& v : y) v = g(rng);
  for (float& v : w) v = g(rng);
  GramAccumulator gram(n_in);
  CrossAccumulator cross(n_in, m);
  gram.add(x.data(), rows);
  cross.add(x.data(), y.data(), rows);
  double direct = 0, yy = 0;
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < m; ++j) {
      double pred = 0;
      for (int i = 0; i < n_in; ++i) pred += double(x[size_t(t * n_in + i)]) * w[size_t(i * m + j)];
      const double yv = y[size_t(t * m + j)];
      direct += (yv - pred) * (yv - pred);
      yy += yv * yv;
    }
  const double moments = squared_error_from_moments(w, gram.matrix(), cross.matrix(), yy, n_in, m);
  EXPECT_NEAR(moments, direct, 1e-9 * direct);
  EXPECT_GT(direct, 10.0);  // a real residual, not a trivial zero
}

TEST(TransferRidge, RejectsMismatchedSizes) {
  auto r = ridge_solve(std::vector<double>(4, 0.0), std::vector<double>(3, 0.0), 2, 2, 1.0);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace agentkv
