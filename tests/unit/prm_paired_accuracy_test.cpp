// The paired comparison of two search methods' per-problem correctness (lab/prm/paired_accuracy.h).
#include <gtest/gtest.h>

#include "lab/prm/paired_accuracy.h"

namespace agentkv::prm {
namespace {

std::vector<bool> pattern(int right, int wrong) {
  std::vector<bool> v(size_t(right), true);
  v.insert(v.end(), size_t(wrong), false);
  return v;
}

std::vector<bool> bits(const char* s) {
  std::vector<bool> v;
  for (; *s; ++s) v.push_back(*s == '1');
  return v;
}

TEST(PairedAccuracy, OnlyDiscordantProblemsCount) {
  // 10 problems: both right on 3, a alone on 4, b alone on 1, both wrong on 2.
  const std::vector<bool> a = bits("1111111000");
  const std::vector<bool> b = bits("1110000100");
  const PairedAccuracy c = compare_paired(a, b);
  EXPECT_EQ(c.n, 10);
  EXPECT_EQ(c.only_a, 4);
  EXPECT_EQ(c.only_b, 1);
  EXPECT_DOUBLE_EQ(c.difference, 0.3);
  // Exact McNemar: 2 * P(X <= 1), X ~ Bin(5, 1/2) = 2 * 6/32.
  EXPECT_NEAR(c.p_value, 0.375, 1e-12);
  EXPECT_LT(c.ci_low, 0.0);
  EXPECT_GT(c.ci_high, 0.3);
  EXPECT_FALSE(c.decided());
}

TEST(PairedAccuracy, ALargeConsistentLeadIsDecided) {
  // 200 problems, a alone right on 30, b alone on 5: the interval excludes a tie.
  std::vector<bool> a = pattern(100, 100), b = a;
  for (int i = 0; i < 30; ++i) b[size_t(i)] = false;
  for (int i = 100; i < 105; ++i) b[size_t(i)] = true;
  const PairedAccuracy c = compare_paired(a, b);
  EXPECT_EQ(c.only_a, 30);
  EXPECT_EQ(c.only_b, 5);
  EXPECT_NEAR(c.difference, 0.125, 1e-12);
  EXPECT_TRUE(c.decided());
  EXPECT_GT(c.ci_low, 0.0);
  EXPECT_LT(c.p_value, 1e-4);
  // Swapping the methods mirrors everything.
  const PairedAccuracy r = compare_paired(b, a);
  EXPECT_NEAR(r.ci_low, -c.ci_high, 1e-12);
  EXPECT_NEAR(r.ci_high, -c.ci_low, 1e-12);
  EXPECT_DOUBLE_EQ(r.p_value, c.p_value);
}

TEST(PairedAccuracy, IdenticalMethodsAndEmptyInput) {
  const std::vector<bool> a = pattern(7, 5);
  const PairedAccuracy same = compare_paired(a, a);
  EXPECT_EQ(same.difference, 0.0);
  EXPECT_EQ(same.p_value, 1.0);
  EXPECT_LT(same.ci_low, 0.0);  // no discordant problem still leaves an interval around 0
  EXPECT_GT(same.ci_high, 0.0);
  EXPECT_FALSE(same.decided());
  const PairedAccuracy none = compare_paired({}, {});
  EXPECT_EQ(none.n, 0);
  EXPECT_FALSE(none.decided());
}

TEST(PairedAccuracy, PValueStaysFiniteForManyProblems) {
  std::vector<bool> a = pattern(3000, 3000), b = pattern(2900, 3100);
  const PairedAccuracy c = compare_paired(a, b);
  EXPECT_EQ(c.only_a, 100);
  EXPECT_GT(c.p_value, 0.0);
  EXPECT_LT(c.p_value, 1e-20);
  EXPECT_NE(describe(c).find("McNemar"), std::string::npos);
}

}  // namespace
}  // namespace agentkv::prm
