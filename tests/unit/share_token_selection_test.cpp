// select_tokens: the first tokens always, then the largest deviations, exact indices.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "share/token_selection.h"

namespace agentkv {
namespace {

using V = std::vector<int32_t>;

TEST(TokenSelection, FirstTokensThenLargestDeviations) {
  const std::vector<float> dev = {9, 0, 5, 1, 7, 3, 7, 2, 0, 4};
  EXPECT_EQ(select_tokens(dev, 0.0, 2), (V{0, 1}));
  EXPECT_EQ(select_tokens(dev, 0.2, 2), (V{0, 1, 4, 6}));      // 7 and 7: both
  EXPECT_EQ(select_tokens(dev, 0.1, 2), (V{0, 1, 4}));         // tie 7/7 goes to the lower index
  EXPECT_EQ(select_tokens(dev, 0.3, 0), (V{0, 4, 6}));         // 9, 7, 7
  EXPECT_EQ(select_tokens(dev, 0.25, 0), (V{0, 4, 6}));        // ceil(2.5) = 3
  EXPECT_EQ(select_tokens(dev, 1.0, 3), (V{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(select_tokens(dev, 0.9, 3).size(), 10u);           // capped at the segment
}

TEST(TokenSelection, ExactRatiosDoNotRoundUp) {
  const std::vector<float> dev(20, 1.0f);
  EXPECT_EQ(select_tokens(dev, 0.15, 0).size(), 3u);
  EXPECT_EQ(select_tokens(dev, 0.05, 0).size(), 1u);
  EXPECT_EQ(select_tokens(dev, 0.3, 4).size(), 10u);
}

TEST(TokenSelection, LastTokensAlwaysAndNeverRanked) {
  // The last ones are taken whatever their deviation (a transfer's native suffix has none: NaN).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> dev = {9, 0, 5, 1, 7, 3, 7, 2, nan, nan};
  EXPECT_EQ(select_tokens(dev, 0.0, 0, 2), (V{8, 9}));
  EXPECT_EQ(select_tokens(dev, 0.2, 1, 2), (V{0, 4, 6, 8, 9}));  // 7, 7 among 1..7
  EXPECT_EQ(select_tokens(dev, 1.0, 2, 3).size(), 10u);
  EXPECT_EQ(select_tokens(dev, 0.0, 6, 6).size(), 10u);           // first and last overlap
}

TEST(TokenSelection, ShortAndEmptySegments) {
  EXPECT_TRUE(select_tokens({}, 0.5, 4).empty());
  const std::vector<float> dev = {1, 2};
  EXPECT_EQ(select_tokens(dev, 0.0, 4), (V{0, 1}));
}

}  // namespace
}  // namespace agentkv
