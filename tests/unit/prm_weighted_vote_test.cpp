// search's kvprm-vote without a model: each final answer weighs the summed sigmoid of its candidates'
// PRM log-odds, so two confident candidates outvote three doubtful ones, and a candidate without a
// final answer (or without a score) adds nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "lab/prm/best_of_n.h"

namespace agentkv::prm {
namespace {

Candidate stating(std::optional<int64_t> answer) {
  Candidate c;
  c.check.final_answer = answer;
  return c;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(WeightedVote, ConfidentMinorityOutweighsDoubtfulMajority) {
  const std::vector<Candidate> cands = {stating(7), stating(5), stating(7), stating(5), stating(5), stating(std::nullopt)};
  const std::vector<double> prm = {3.0, -2.0, 2.5, -2.0, -3.0, 9.0};
  const std::vector<double> w = weighted_vote(cands, prm);
  ASSERT_EQ(w.size(), cands.size());
  const double seven = sigmoid(3.0) + sigmoid(2.5), five = 2 * sigmoid(-2.0) + sigmoid(-3.0);
  EXPECT_DOUBLE_EQ(w[0], seven);
  EXPECT_DOUBLE_EQ(w[2], seven);
  EXPECT_DOUBLE_EQ(w[1], five);
  EXPECT_DOUBLE_EQ(w[4], five);
  EXPECT_GT(seven, five);  // plain vote would choose 5 (three against two)
  EXPECT_EQ(w[5], -std::numeric_limits<double>::infinity());
}

TEST(WeightedVote, UnscoredCandidatesAddNothing) {
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  const std::vector<Candidate> cands = {stating(1), stating(1), stating(2)};
  const std::vector<double> w = weighted_vote(cands, std::vector<double>{kNone, 0.0, kNone});
  EXPECT_DOUBLE_EQ(w[0], 0.5);
  EXPECT_DOUBLE_EQ(w[1], 0.5);
  EXPECT_DOUBLE_EQ(w[2], 0.0);
}

}  // namespace
}  // namespace agentkv::prm
