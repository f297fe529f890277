// Monte-Carlo step values without a model: the share of rollouts whose final answer (the "Answer:"
// line, else the last step's result) is the problem's, read after the step's prefix lines; and the
// prefix lines a proposed step is checked and continued from.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lab/prm/arith_problem.h"
#include "lab/prm/step_labels.h"
#include "lab/prm/step_values.h"

namespace agentkv::prm {
namespace {

// Seed 0: "Step 1: 4 * 3 = 12\nStep 2: 4 + 12 = 16\nStep 3: 16 + 3 = 19\nAnswer: 19\n".
const ArithProblem kProblem = generate_arith_problem(0);

TEST(StepPrefixLines, ReferenceStepsBeforeTheProposalThenIt) {
  EXPECT_EQ(step_prefix_lines(kProblem, 0, "Step 1: 4 + 4 = 8"), (std::vector<std::string>{"Step 1: 4 + 4 = 8"}));
  EXPECT_EQ(step_prefix_lines(kProblem, 2, "Step 3: 16 + 3 = 19"),
            (std::vector<std::string>{"Step 1: 4 * 3 = 12", "Step 2: 4 + 12 = 16", "Step 3: 16 + 3 = 19"}));
}

TEST(RolloutStepValue, ShareOfRolloutsReachingTheAnswer) {
  const std::vector<std::string> prefix = step_prefix_lines(kProblem, 1, "Step 2: 4 + 12 = 16");
  const std::vector<std::string> rollouts = {
      "Step 3: 16 + 3 = 19\nAnswer: 19\n",  // right
      "Step 3: 16 + 3 = 19\n",              // right: no answer line, the last step's result counts
      "Step 3: 16 - 3 = 13\nAnswer: 13\n",  // wrong answer
      "Answer: 19",                          // right, no trailing newline
      "",                                    // nothing more: the last step states 16
  };
  EXPECT_DOUBLE_EQ(rollout_step_value(prefix, rollouts, kProblem), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(rollout_step_value(prefix, std::span(rollouts).first(1), kProblem), 1.0);
  EXPECT_DOUBLE_EQ(rollout_step_value(prefix, std::span(rollouts).subspan(2, 1), kProblem), 0.0);
}

// A wrong step the policy recovers from still has value: the answer alone is checked, as the paper's
// Monte-Carlo labels do; the checker's hard label of the step itself stays 0.
TEST(RolloutStepValue, AWrongStepCanStillReachTheAnswer) {
  const std::vector<std::string> prefix = step_prefix_lines(kProblem, 1, "Step 2: 4 + 12 = 17");
  const std::vector<std::string> rollouts = {"Step 3: 16 + 3 = 19\nAnswer: 19\n", "Step 3: 17 + 3 = 20\nAnswer: 20\n"};
  EXPECT_DOUBLE_EQ(rollout_step_value(prefix, rollouts, kProblem), 0.5);
}

TEST(RolloutStepValue, NoRolloutsIsZero) {
  EXPECT_DOUBLE_EQ(rollout_step_value(step_prefix_lines(kProblem, 0, "Step 1: 4 * 3 = 12"), {}, kProblem), 0.0);
}

}  // namespace
}  // namespace agentkv::prm
