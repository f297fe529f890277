// fit-prm --lora's batching without a model: batches of `batch` examples in the shuffled order, or
// (--batch-by-problem) one batch per problem, problems in the order the shuffle first met them and
// each problem's examples in their shuffled order.
#include <gtest/gtest.h>

#include <vector>

#include "lab/prm/fit_lora.h"

namespace agentkv::prm {
namespace {

TEST(PlanBatches, FixedSizeBatchesKeepTheShuffledOrder) {
  std::vector<size_t> order = {4, 0, 3, 1, 2};
  const std::vector<size_t> problem_of = {0, 0, 1, 1, 2};
  EXPECT_EQ(plan_batches(order, problem_of, 2, false), (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(order, (std::vector<size_t>{4, 0, 3, 1, 2}));
  EXPECT_EQ(plan_batches(order, problem_of, 8, false), (std::vector<size_t>{0}));
}

TEST(PlanBatches, ByProblemMakesOneBatchPerProblem) {
  // Examples 0..5 of problems 7, 7, 3, 9, 3, 7; shuffled order 4, 1, 3, 0, 5, 2 meets problem 3 first
  // (example 4), then 7 (example 1), then 9 (example 3).
  std::vector<size_t> order = {4, 1, 3, 0, 5, 2};
  const std::vector<size_t> problem_of = {7, 7, 3, 9, 3, 7};
  const std::vector<size_t> starts = plan_batches(order, problem_of, 2, true);
  EXPECT_EQ(order, (std::vector<size_t>{4, 2, 1, 0, 5, 3}));
  EXPECT_EQ(starts, (std::vector<size_t>{0, 2, 5}));
  std::vector<size_t> none;
  EXPECT_TRUE(plan_batches(none, problem_of, 2, true).empty());
}

}  // namespace
}  // namespace agentkv::prm
