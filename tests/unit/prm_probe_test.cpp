// The verifier's probe without a model: ridge logistic regression on standardised features, and
// the probe's round trip through the calibration file, with corrupted files refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "lab/prm/calibration_fit.h"
#include "prm/calibration_file.h"
#include "lab/prm/fit_prm.h"
#include "prm/step_probe.h"

namespace agentkv::prm {
namespace {

// Label = whether feature 3 (on a scale far from the others) plus noise is positive; the other
// features are noise. A fixed LCG keeps the data identical everywhere.
struct ProbeData {
  std::vector<float> x;
  std::vector<int> y;
};
ProbeData make_probe_data(int n, int d, uint64_t seed) {
  ProbeData out;
  uint64_t s = seed;
  auto uniform = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return double(s >> 11) / double(uint64_t(1) << 53) - 0.5;
  };
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < d; ++i) out.x.push_back(float(i == 3 ? 100 + 50 * uniform() : uniform()));
    out.y.push_back(out.x[size_t(r * d + 3)] - 100 + 20 * uniform() > 0 ? 1 : 0);
  }
  return out;
}

TEST(StepProbe, LearnsTheInformativeFeatureAndGeneralises) {
  const int d = 40;
  const ProbeData train = make_probe_data(300, d, 1), test = make_probe_data(300, d, 2);
  const StepProbe p = fit_step_probe(train.x, train.y, 7, 0.01);
  ASSERT_EQ(p.n_features(), d);
  EXPECT_EQ(p.layer, 7);
  // The informative feature carries the largest weight, positive.
  for (int i = 0; i < d; ++i)
    if (i != 3) {
      EXPECT_LT(std::fabs(p.weight[size_t(i)]), p.weight[3]) << i;
    }
  EXPECT_GT(auroc(apply_probe(p, test.x), test.y), 0.85);
  // A stronger ridge shrinks the weights.
  const StepProbe strong = fit_step_probe(train.x, train.y, 7, 10.0);
  EXPECT_LT(std::fabs(strong.weight[3]), std::fabs(p.weight[3]));
}

TEST(StepProbe, OneClassGivesTheBaseRate) {
  const ProbeData train = make_probe_data(20, 5, 3);
  const StepProbe p = fit_step_probe(train.x, std::vector<int>(20, 1), 1, 0.1);
  for (double w : p.weight) EXPECT_EQ(w, 0.0);
  EXPECT_GT(p.bias, 0.0);
  EXPECT_TRUE(std::isfinite(p.bias));
}

TEST(StepProbe, RmsNormalisedRowsHaveUnitRms) {
  std::vector<float> x = {3, 4, 0, 0, 1, 1, 1, 1};
  rms_normalize_rows(x.data(), 2, 4, 0);
  EXPECT_NEAR(x[0], 3 / std::sqrt(25.0 / 4), 1e-6);
  EXPECT_NEAR(x[4], 1, 1e-6);
}

std::string slurp_probe(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(CalibrationFile, ProbeRoundTripsExactlyAndCorruptionIsRefused) {
  const std::string path = ::testing::TempDir() + "prm_probe_" + std::to_string(::getpid()) + ".json";
  const ProbeData train = make_probe_data(100, 6, 4);
  CalibrationRecord r;
  r.model_fingerprint = 0x0123456789abcdefull;
  r.model_name = "m";
  r.question = "q";
  r.pos_token = 1;
  r.neg_token = 2;
  r.probe = fit_step_probe(train.x, train.y, 5, 0.1);
  r.heldout_auroc = 0.75;
  ASSERT_TRUE(write_calibration(path, r).ok());
  auto back = read_calibration(path);
  ASSERT_TRUE(back.ok()) << back.error();
  ASSERT_TRUE(back->probe.has_value());
  EXPECT_EQ(back->probe->weight, r.probe->weight);
  EXPECT_EQ(back->probe->mean, r.probe->mean);
  EXPECT_EQ(back->probe->inv_std, r.probe->inv_std);
  EXPECT_EQ(back->probe->bias, r.probe->bias);
  EXPECT_EQ(back->probe->layer, 5);
  EXPECT_EQ(back->heldout_auroc, 0.75);
  // One weight edited: the checksum no longer matches.
  std::string text = slurp_probe(path);
  const size_t w = text.find("\"weight\":[");
  ASSERT_NE(w, std::string::npos);
  const size_t first = w + 10, comma = text.find(',', first);
  text.replace(first, comma - first, "0.125");
  {
    std::ofstream f(path, std::ios::trunc);
    f << text;
  }
  auto edited = read_calibration(path);
  ASSERT_FALSE(edited.ok());
  EXPECT_NE(edited.error().find("checksum"), std::string::npos) << edited.error();
  // Truncated: not JSON any more.
  {
    std::ofstream f(path, std::ios::trunc);
    f << text.substr(0, text.size() / 2);
  }
  EXPECT_FALSE(read_calibration(path).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace agentkv::prm

namespace agentkv::prm {
namespace {

// Each kind's AUROC counts only the correct steps against the wrong steps of that kind.
TEST(FitPrm, AurocByErrorKindSeparatesTheKinds) {
  const std::vector<double> z{0.9, 0.8, 0.1, 0.2, 0.95, 0.5};
  const std::vector<int> y{1, 1, 0, 0, 0, 0};
  const std::vector<StepError> e{StepError::kNone,       StepError::kNone,     StepError::kArithmetic,
                                 StepError::kArithmetic, StepError::kOffTrack, StepError::kOffTrack};
  const auto a = auroc_by_error(z, y, e);
  EXPECT_TRUE(std::isnan(a[size_t(StepError::kNone)]));
  EXPECT_DOUBLE_EQ(a[size_t(StepError::kArithmetic)], 1.0);
  EXPECT_DOUBLE_EQ(a[size_t(StepError::kOffTrack)], 0.5);  // 0.95 beats both, 0.5 loses to both
  EXPECT_TRUE(std::isnan(a[size_t(StepError::kFormat)])) << "no wrong steps of that kind";
}

}  // namespace
}  // namespace agentkv::prm
