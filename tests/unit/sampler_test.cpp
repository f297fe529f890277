#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace agentkv {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  Sampler s(p);
  auto l = logits_of({1.0f, 3.0f, 3.0f, -2.0f});
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 50; ++i) {
    auto l = logits_of({0.1f, 0.2f, 2.0f, 0.3f});
    EXPECT_EQ(s.sample(l.data(), 4, {}), 2);
  }
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  Sampler a(p), b(p);
  for (int i = 0; i < 100; ++i) {
    auto la = logits_of({0.0f, 0.5f, 1.0f, 0.2f, 0.9f});
    auto lb = la;
    EXPECT_EQ(a.sample(la.data(), 5, {}), b.sample(lb.data(), 5, {}));
  }
}

TEST(Sampler, TemperatureSamplingFollowsSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = logits_of({0.0f, std::log(3.0f)});  // probabilities 1/4, 3/4
    counts[s.sample(l.data(), 2, {})]++;
  }
  EXPECT_NEAR(double(counts[1]) / n, 0.75, 0.02);
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;  // probabilities ~0.64, 0.24, 0.09, 0.03: only the first survives
  Sampler s(p);
  for (int i = 0; i < 200; ++i) {
    auto l = logits_of({3.0f, 2.0f, 1.0f, 0.0f});
    EXPECT_EQ(s.sample(l.data(), 4, {}), 0);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p_max
  Sampler s(p);
  for (int i = 0; i < 300; ++i) {
    auto l = logits_of({2.0f, 2.0f - std::log(1.5f), -5.0f, -6.0f});
    const int t = s.sample(l.data(), 4, {});
    EXPECT_TRUE(t == 0 || t == 1);
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  auto l = logits_of({3.0f, 2.0f, -1.0f});
  const std::vector<int32_t> hist = {0, 2};
  EXPECT_EQ(s.sample(l.data(), 3, hist), 1);  // 3/2 = 1.5 < 2
  EXPECT_FLOAT_EQ(l[0], 1.5f);
  EXPECT_FLOAT_EQ(l[2], -2.0f);
}

TEST(Sampler, ValidateNamesTheBadField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(p.validate().error().find("top_p"), std::string::npos);
  p = SamplingParams();
  p.temperature = -1.0f;
  EXPECT_NE(p.validate().error().find("temperature"), std::string::npos);
}

}  // namespace
}  // namespace agentkv
