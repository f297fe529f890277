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

// fit-prm --answers: answer lines are examples labelled by the answer they state, and proposals come
// also after the whole reference, where another step is one too many. Without it answer lines are
// only counted. add_proposal reads the set's problems and reference line counts only (no model).
TEST(StepLabels, AnswerLinesAreLabelledByTheirAnswerWithAnswers) {
  StepSet set;
  set.problems = {kProblem};
  set.ref_lines = {std::vector<std::vector<int32_t>>(3, std::vector<int32_t>{1})};  // three reference steps
  const auto line = [](const std::string& text) {
    StepProposal p;
    p.text = text;
    p.tokens = {1, 2};
    return p;
  };
  add_proposal(set, 0, 1, line("Answer: 19"));
  EXPECT_TRUE(set.steps.empty());  // counted, not an example
  EXPECT_EQ(set.n_proposals, 1);
  set.with_answers = true;
  add_proposal(set, 0, 3, line("Answer: 19"));          // after the whole reference: right
  add_proposal(set, 0, 3, line("Answer: 20"));          // a wrong answer
  add_proposal(set, 0, 1, line("Answer: 12"));          // an intermediate result stated as the answer
  add_proposal(set, 0, 3, line("Step 4: 19 + 3 = 22"));  // a step after the solution is done
  add_proposal(set, 0, 2, line("Step 3: 16 + 3 = 19"));  // steps are labelled as before
  add_proposal(set, 0, 3, line("So the total is 19."));  // neither: counted only
  ASSERT_EQ(set.steps.size(), 5u);
  EXPECT_EQ(set.n_proposals, 7);
  std::vector<int> labels;
  for (const LabelledStep& s : set.steps) labels.push_back(s.label);
  EXPECT_EQ(labels, (std::vector<int>{1, 0, 0, 0, 1}));
  EXPECT_EQ(set.steps[1].why, "the answer is not the problem's");
  EXPECT_EQ(set.steps[3].error, StepError::kOffTrack) << set.steps[3].why;
  EXPECT_EQ(set.steps[3].k, 3u);
  // Only the step proposed before the reference's end is in the pool a step verifier is measured on.
  std::vector<bool> before_end;
  for (const LabelledStep& s : set.steps) before_end.push_back(is_step_before_end(set, s));
  EXPECT_EQ(before_end, (std::vector<bool>{false, false, false, false, true}));
  // The beam's stop decisions: the right final answer against the step after it (stop), the right next
  // step against the intermediate answer of an earlier prefix (go on); a wrong final answer is neither.
  add_proposal(set, 0, 1, line("Step 2: 12 + 4 = 17"));  // a wrong next step: no part in either
  std::vector<StopRole> roles;
  for (const LabelledStep& s : set.steps) roles.push_back(stop_role(set, s));
  EXPECT_EQ(roles, (std::vector<StopRole>{StopRole::kRightFinalAnswer, StopRole::kNone, StopRole::kEarlyAnswer,
                                          StopRole::kExtraStep, StopRole::kRightNextStep, StopRole::kNone}));
  set.with_answers = false;  // a set without answer lines has no stop decisions
  EXPECT_EQ(stop_role(set, set.steps[4]), StopRole::kNone);
}

TEST(RolloutStepValue, NoRolloutsIsZero) {
  EXPECT_DOUBLE_EQ(rollout_step_value(step_prefix_lines(kProblem, 0, "Step 1: 4 * 3 = 12"), {}, kProblem), 0.0);
}

}  // namespace
}  // namespace agentkv::prm
