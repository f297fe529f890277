// bench-agents --find-fit's searches (lab/agents/fit_search.h): for every threshold in a range, both find
// the largest count that holds, and the search from a guess needs few trials when the guess is close.
#include <gtest/gtest.h>

#include <set>

#include "lab/agents/fit_search.h"

namespace agentkv {
namespace {

struct Trials {
  int threshold;  // holds for n <= threshold
  std::set<int> tried;
  Result<bool> operator()(int n) {
    EXPECT_TRUE(tried.insert(n).second) << "count " << n << " tried twice";
    return n <= threshold;
  }
};

TEST(FitSearchTest, DoublingFindsEveryThreshold) {
  for (int t = 2; t <= 300; ++t) {
    Trials trials{t, {}};
    auto n = largest_where(2, 300, std::ref(trials));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, t);
  }
}

TEST(FitSearchTest, FromAGuessFindsEveryThresholdFromEveryStart) {
  for (int t = 1; t <= 130; ++t)
    for (int start : {1, 2, 3, 7, 40, 64, 100, 129, 130, 500}) {
      Trials trials{t, {}};
      auto n = largest_where_from(2, 130, start, std::ref(trials));
      ASSERT_TRUE(n.ok());
      EXPECT_EQ(*n, t < 2 ? 1 : t) << "threshold " << t << ", start " << start;  // lo - 1: none holds
      for (int k : trials.tried) EXPECT_TRUE(k >= 2 && k <= 130) << k;
    }
}

TEST(FitSearchTest, FromACloseGuessNeedsFewTrials) {
  // The count computed from final contexts is typically within a tenth of the one found by running.
  for (int t : {110, 120, 130, 140}) {
    Trials trials{t, {}};
    auto n = largest_where_from(2, 1000, 125, std::ref(trials));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, t);
    EXPECT_LE(trials.tried.size(), 7u) << "threshold " << t;
    Trials doubling{t, {}};
    ASSERT_TRUE(largest_where(2, 1000, std::ref(doubling)).ok());
    EXPECT_LT(trials.tried.size(), doubling.tried.size()) << "threshold " << t;
  }
}

TEST(FitSearchTest, AnErrorStopsTheSearch) {
  auto failing = [](int n) -> Result<bool> {
    if (n > 10) return make_error("trial failed");
    return true;
  };
  EXPECT_FALSE(largest_where_from(2, 100, 8, failing).ok());
  EXPECT_FALSE(largest_where(2, 100, failing).ok());
}

}  // namespace
}  // namespace agentkv
