// The verify head's fitting and bookkeeping without a model: logistic regression recovers known
// parameters, AUROC matches hand-counted pairs, and the calibration file round-trips and refuses
// another model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "lab/prm/calibration_fit.h"
#include "prm/calibration_file.h"

namespace agentkv::prm {
namespace {

TEST(CalibrationFit, AurocCountsPairs) {
  // Positives {0.9, 0.4}, negatives {0.5, 0.1, 0.4}: pairs won 3 + 1 + 0.5 (tie) = 4.5 of 6.
  const std::vector<double> s = {0.9, 0.5, 0.4, 0.1, 0.4};
  const std::vector<int> y = {1, 0, 1, 0, 0};
  EXPECT_DOUBLE_EQ(auroc(s, y), 4.5 / 6);
  EXPECT_DOUBLE_EQ(auroc(std::vector<double>{1, 2, 3}, std::vector<int>{0, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auroc(std::vector<double>{1, 2, 3}, std::vector<int>{1, 0, 0}), 0.0);
  EXPECT_TRUE(std::isnan(auroc(std::vector<double>{1, 2}, std::vector<int>{1, 1})));
}

// Labels drawn with P(y = 1 | x) = sigmoid(2x - 1) from a fixed LCG: the fit must land near (2, -1).
TEST(CalibrationFit, RecoversKnownLogistic) {
  std::vector<float> x;
  std::vector<int> y;
  uint64_t s = 12345;
  auto uniform = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return double(s >> 11) / double(uint64_t(1) << 53);
  };
  for (int i = 0; i < 20000; ++i) {
    const double xi = uniform() * 6 - 3;
    x.push_back(float(xi));
    y.push_back(uniform() < 1 / (1 + std::exp(-(2 * xi - 1))) ? 1 : 0);
  }
  const Calibration c = fit_logistic(x, y);
  EXPECT_NEAR(c.a, 2.0, 0.1);
  EXPECT_NEAR(c.b, -1.0, 0.1);
  // The optimum beats its neighbours.
  const double best = log_loss(c, x, y);
  EXPECT_LT(best, log_loss({c.a * 1.1, c.b}, x, y));
  EXPECT_LT(best, log_loss({c.a, c.b + 0.1}, x, y));
}

TEST(CalibrationFit, SeparableAndOneClassStayFinite) {
  const std::vector<float> x = {-2, -1, 1, 2};
  const Calibration sep = fit_logistic(x, std::vector<int>{0, 0, 1, 1});
  EXPECT_TRUE(std::isfinite(sep.a) && std::isfinite(sep.b));
  EXPECT_GT(sep.a, 1.0);
  const Calibration one = fit_logistic(x, std::vector<int>{1, 1, 1, 1});
  EXPECT_EQ(one.a, 0.0);
  EXPECT_GT(one.b, 0.0);
  EXPECT_TRUE(std::isfinite(one.b));
}

TEST(CalibrationFile, RoundTripsAndRejectsBadFiles) {
  const std::string path = ::testing::TempDir() + "prm_cal_" + std::to_string(::getpid()) + ".json";
  CalibrationRecord r;
  r.model_fingerprint = 0xfedcba9876543210ull;
  r.model_name = "smollm2";
  r.question = "Is the last step correct? Answer + or -.";
  r.pos_token = 27;
  r.neg_token = 29;
  r.calibration = {0.75, -0.125};
  r.n_train_steps = 500;
  r.n_train_positive = 120;
  r.train_auroc = 0.8125;
  r.train_log_loss = 0.5;
  ASSERT_TRUE(write_calibration(path, r).ok());
  auto back = read_calibration(path);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->model_fingerprint, r.model_fingerprint);
  EXPECT_EQ(back->model_name, r.model_name);
  EXPECT_EQ(back->question, r.question);
  EXPECT_EQ(back->pos_token, 27);
  EXPECT_EQ(back->neg_token, 29);
  EXPECT_EQ(back->calibration.a, 0.75);
  EXPECT_EQ(back->calibration.b, -0.125);
  EXPECT_EQ(back->n_train_steps, 500);
  EXPECT_EQ(back->train_auroc, 0.8125);
  {
    std::ofstream f(path, std::ios::trunc);
    f << "{\"format\": \"agentkv-prm-calibration\", \"version\": 1}";
  }
  auto missing = read_calibration(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("model_name"), std::string::npos) << missing.error();
  {
    std::ofstream f(path, std::ios::trunc);
    f << "not json";
  }
  EXPECT_FALSE(read_calibration(path).ok());
  EXPECT_FALSE(read_calibration(path + ".absent").ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace agentkv::prm
