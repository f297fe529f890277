// The verify head's fitting and bookkeeping without a model: logistic regression recovers known
// parameters, AUROC matches hand-counted pairs, and the calibration file round-trips and refuses
// another model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "lab/prm/calibration_fit.h"
#include "prm/calibration_file.h"
#include "util/json.h"

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

// Two problems: a score that puts every step of the easy problem (group 0) above the hard one's
// separates the labels globally, yet ranks each problem's own steps wrongly.
TEST(CalibrationFit, WithinGroupAurocCountsOnlyPairsOfAGroup) {
  // Group 0: positive 0.9, negatives 0.95, 0.8 -> pairs won 0 + 1 = 1 of 2. Group 1: positive 0.3,
  // negatives 0.3 (tie), 0.1 -> 0.5 + 1 = 1.5 of 2. Group 2: positives only, no pair.
  const std::vector<double> s = {0.9, 0.3, 0.95, 0.3, 0.8, 0.1, 0.7};
  const std::vector<int> y = {1, 1, 0, 0, 0, 0, 1};
  const std::vector<size_t> g = {0, 1, 0, 1, 0, 1, 2};
  int64_t pairs = 0;
  EXPECT_DOUBLE_EQ(within_group_auroc(s, y, g, &pairs), 2.5 / 4);
  EXPECT_EQ(pairs, 4);
  // One group: the plain AUROC.
  const std::vector<size_t> one(s.size(), 7);
  EXPECT_DOUBLE_EQ(within_group_auroc(s, y, one), auroc(s, y));
  // The easy problem's steps all above the hard one's, its own ranked backwards: globally 4 of 6
  // pairs right, within the one problem that has both labels 0 of 2.
  const std::vector<double> s2 = {0.8, 0.85, 0.9, 0.1, 0.2};
  const std::vector<int> y2 = {1, 1, 0, 0, 0};
  const std::vector<size_t> g2 = {0, 0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(within_group_auroc(s2, y2, g2), 0.0);
  EXPECT_DOUBLE_EQ(auroc(s2, y2), 4.0 / 6);
  EXPECT_TRUE(std::isnan(within_group_auroc(std::vector<double>{1, 2}, std::vector<int>{1, 0},
                                            std::vector<size_t>{0, 1})));
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

CalibrationRecord sample_record() {
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
  return r;
}

TEST(CalibrationFile, RoundTripsAndRejectsBadFiles) {
  const std::string path = ::testing::TempDir() + "prm_cal_" + std::to_string(::getpid()) + ".json";
  CalibrationRecord r = sample_record();
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
    f << "{\"format\": \"agentkv-prm-calibration\", \"version\": 3}";
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

// Every value in the file is covered by the checksum: editing any one (the question, a token, the
// calibration, a probe number, the figures of the fit) is refused with the file and the reason named.
TEST(CalibrationFile, EditingAnyFieldIsRefused) {
  const std::string path = ::testing::TempDir() + "prm_cal_edit_" + std::to_string(::getpid()) + ".json";
  CalibrationRecord r = sample_record();
  StepProbe probe;
  probe.layer = 3;
  probe.bias = 0.25;
  probe.l2 = 0.1;
  probe.mean = {0.5f, -0.5f};
  probe.inv_std = {2.0f, 4.0f};
  probe.weight = {1.5, -2.5};
  r.probe = probe;
  r.heldout_auroc = 0.7;
  ASSERT_TRUE(write_calibration(path, r).ok());
  std::string text;
  {
    std::ifstream f(path);
    text.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto good = parse_json(text);
  ASSERT_TRUE(good.ok()) << good.error();
  ASSERT_TRUE(read_calibration(path).ok());
  // Each leaf value, by JSON pointer: strings get a character appended, numbers change.
  const Json flat = good->flatten();
  int edited = 0;
  for (const auto& [pointer, value] : flat.items()) {
    if (pointer == "/checksum" || pointer == "/format" || pointer == "/version") continue;
    Json bad = *good;
    Json& leaf = bad[Json::json_pointer(pointer)];
    if (leaf.is_string()) leaf = leaf.get<std::string>() + "x";
    else if (leaf.is_number_integer()) leaf = leaf.get<int64_t>() + 1;
    else leaf = leaf.get<double>() * 2 + 1;
    {
      std::ofstream f(path, std::ios::trunc);
      f << dump_json(bad);
    }
    auto back = read_calibration(path);
    ASSERT_FALSE(back.ok()) << pointer << " edited and accepted";
    EXPECT_NE(back.error().find(path), std::string::npos) << back.error();
    EXPECT_NE(back.error().find("checksum mismatch"), std::string::npos) << pointer << ": " << back.error();
    ++edited;
  }
  EXPECT_GE(edited, 20);  // every field, the probe's array elements included
  // An added member is a change too.
  Json extra = *good;
  extra["note"] = "x";
  {
    std::ofstream f(path, std::ios::trunc);
    f << dump_json(extra);
  }
  EXPECT_FALSE(read_calibration(path).ok());
  // Versions 1 and 2 (checksum over the probe only) are refused with how to make a new one.
  for (int version : {1, 2}) {
    Json old = *good;
    old["version"] = version;
    {
      std::ofstream f(path, std::ios::trunc);
      f << dump_json(old);
    }
    auto back = read_calibration(path);
    ASSERT_FALSE(back.ok());
    EXPECT_NE(back.error().find("re-create it with agentkv fit-prm"), std::string::npos) << back.error();
  }
  // Special files are refused before any read.
  auto dir = read_calibration(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().find("a directory"), std::string::npos) << dir.error();
  auto dev = read_calibration("/dev/zero");
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.error().find("a character device"), std::string::npos) << dev.error();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace agentkv::prm
