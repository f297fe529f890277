// The arith task without a model: problems are a pure function of the seed, the splits never share
// a seed, the reference solution passes the checker, and each kind of wrong step is caught.
#include <gtest/gtest.h>

#include <set>

#include "lab/prm/arith_problem.h"
#include "lab/prm/arith_prompt.h"
#include "lab/prm/step_checker.h"

namespace agentkv::prm {
namespace {

TEST(ArithProblem, SameSeedSameProblem) {
  for (uint64_t i = 0; i < 50; ++i) {
    const ArithProblem a = generate_arith_problem(arith_seed(ArithSplit::kTrain, i));
    const ArithProblem b = generate_arith_problem(arith_seed(ArithSplit::kTrain, i));
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.quantities, b.quantities);
    EXPECT_EQ(a.answer, b.answer);
  }
}

// A golden of one problem: catches an accidental change of the PRNG or the templates, which would
// silently change every split and invalidate fitted calibrations.
TEST(ArithProblem, GoldenSeedZero) {
  const ArithProblem p = generate_arith_problem(0);
  EXPECT_EQ(p.text,
            "Lucy has 4 coins. Lucy buys 4 packs with 3 coins in each pack. Lucy gets 3 more coins. "
            "How many coins does Lucy have now?");
  EXPECT_EQ(format_solution(p), "Step 1: 4 * 3 = 12\nStep 2: 4 + 12 = 16\nStep 3: 16 + 3 = 19\nAnswer: 19\n");
  EXPECT_EQ(p.quantities, (std::vector<int64_t>{4, 4, 3, 3}));
}

TEST(ArithProblem, SplitsAreDisjointAndVaried) {
  std::set<uint64_t> train, held;
  std::set<std::string> texts;
  for (uint64_t i = 0; i < 1000; ++i) {
    train.insert(arith_seed(ArithSplit::kTrain, i));
    held.insert(arith_seed(ArithSplit::kHeldOut, i));
    texts.insert(generate_arith_problem(arith_seed(ArithSplit::kHeldOut, i)).text);
  }
  for (uint64_t s : held) EXPECT_EQ(train.count(s), 0u);
  EXPECT_EQ(train.count(kArithExampleSeed), 0u);
  EXPECT_EQ(held.count(kArithExampleSeed), 0u);
  EXPECT_GT(texts.size(), 990u) << "problems repeat too often";
}

TEST(ArithProblem, ReferenceChainIsConsistent) {
  for (uint64_t i = 0; i < 500; ++i) {
    const ArithProblem p = generate_arith_problem(arith_seed(ArithSplit::kTrain, i));
    ASSERT_GE(p.reference.size(), 2u);
    ASSERT_LE(p.reference.size(), 6u);
    for (const ArithStep& s : p.reference) {
      EXPECT_GE(s.result, 0);
      EXPECT_LT(s.result, 1000);
    }
    EXPECT_EQ(p.answer, p.reference.back().result);
    EXPECT_NE(p.text.find('?'), std::string::npos);
  }
}

// The shape picks the number of operations; the default shape is the task's own problems.
TEST(ArithProblem, ShapeSetsTheOperations) {
  for (uint64_t i = 0; i < 300; ++i) {
    const uint64_t seed = arith_seed(ArithSplit::kHeldOut, i);
    EXPECT_EQ(generate_arith_problem(seed, ArithShape{}).text, generate_arith_problem(seed).text);
    const ArithProblem one = generate_arith_problem(seed, ArithShape{1, 1});
    ASSERT_GE(one.reference.size(), 1u);
    ASSERT_LE(one.reference.size(), 2u);  // buying packs takes two steps
    EXPECT_EQ(one.answer, one.reference.back().result);
    const ArithProblem three = generate_arith_problem(seed, ArithShape{3, 3});
    EXPECT_GE(three.reference.size(), 3u);
    for (const ArithStep& s : three.reference) EXPECT_LT(s.result, 1000);
  }
}

TEST(StepChecker, ReferenceSolutionIsCorrect) {
  for (uint64_t i = 0; i < 500; ++i) {
    const ArithProblem p = generate_arith_problem(arith_seed(ArithSplit::kHeldOut, i));
    const SolutionCheck c = check_solution(format_solution(p), p);
    ASSERT_EQ(c.steps.size(), p.reference.size());
    for (const StepCheck& s : c.steps) EXPECT_TRUE(s.correct) << p.text << "\n" << s.line << ": " << s.why;
    EXPECT_TRUE(c.answer_correct);
    EXPECT_TRUE(c.all_steps_correct);
  }
}

// A fixed hand-built problem so each failure mode is exercised on known numbers.
ArithProblem toy() {
  ArithProblem p;
  p.text = "Tom has 12 apples. Tom buys 3 packs with 5 apples in each pack. Tom gives away 7 apples.";
  p.quantities = {12, 3, 5, 7};
  p.reference = {{3, '*', 5, 15}, {12, '+', 15, 27}, {27, '-', 7, 20}};
  p.answer = 20;
  return p;
}

TEST(StepChecker, EachFailureIsNamed) {
  const ArithProblem p = toy();
  const std::vector<int64_t> avail = p.quantities;
  auto step = [&](const char* line, int k = 1) { return check_step(line, k, p, avail); };
  EXPECT_TRUE(step("Step 1: 3 * 5 = 15").correct);
  EXPECT_TRUE(step("Step 1: 3 x 5 = 15 apples.").correct);
  EXPECT_TRUE(step("Step 1: (3 \xc3\x97 5) = 15").correct);
  EXPECT_FALSE(step("Step 1: 3 * 5 = 16").arithmetic);
  EXPECT_TRUE(step("Step 1: 3 * 5 = 16").parsed);
  EXPECT_FALSE(step("Step 2: 3 * 5 = 15").parsed) << "wrong step number";
  EXPECT_FALSE(step("Step 1: 3 * 5").parsed);
  EXPECT_FALSE(step("Step 1: 15 = 15").parsed) << "no operation";
  EXPECT_FALSE(step("Step 1: 3 * 5 = 15 + 1").parsed);
  EXPECT_FALSE(step("Step 1: 7 / 2 = 3").parsed) << "inexact division";
  const StepCheck ungrounded = step("Step 1: 4 * 5 = 20");
  EXPECT_TRUE(ungrounded.arithmetic);
  EXPECT_FALSE(ungrounded.grounded);
  EXPECT_FALSE(ungrounded.correct);
  const StepCheck off = step("Step 1: 12 + 7 = 19");
  EXPECT_TRUE(off.arithmetic);
  EXPECT_TRUE(off.grounded);
  EXPECT_FALSE(off.on_track);
  EXPECT_FALSE(off.correct);
  EXPECT_FALSE(off.why.empty());
  // The first failed check names the kind of error.
  EXPECT_EQ(step("Step 1: 3 * 5 = 15").error(), StepError::kNone);
  EXPECT_EQ(step("Step 1: 3 * 5").error(), StepError::kFormat);
  EXPECT_EQ(step("Step 1: 7 / 2 = 3").error(), StepError::kFormat);
  EXPECT_EQ(step("Step 1: 3 * 5 = 16").error(), StepError::kArithmetic);
  EXPECT_EQ(step("Step 1: 4 * 5 = 21").error(), StepError::kArithmetic) << "arithmetic comes before grounding";
  EXPECT_EQ(ungrounded.error(), StepError::kUngrounded);
  EXPECT_EQ(off.error(), StepError::kOffTrack);
  EXPECT_STREQ(step_error_name(StepError::kOffTrack), "off-track");
}

TEST(StepChecker, AnErrorPropagatesToStepsThatUseIt) {
  const ArithProblem p = toy();
  // Step 1 is wrong (16), so step 2's use of 16 is ungrounded even though 12 + 16 = 28 is right.
  const SolutionCheck c = check_solution("Step 1: 3 * 5 = 16\nStep 2: 12 + 16 = 28\nStep 3: 28 - 7 = 21\n", p);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_FALSE(c.steps[0].correct);
  EXPECT_TRUE(c.steps[1].arithmetic);
  EXPECT_FALSE(c.steps[1].grounded);
  EXPECT_FALSE(c.steps[2].correct);
  ASSERT_TRUE(c.final_answer.has_value());
  EXPECT_EQ(*c.final_answer, 21);
  EXPECT_FALSE(c.answer_correct);
}

TEST(StepChecker, AnswerLineAndNonStepLines) {
  const ArithProblem p = toy();
  const SolutionCheck c = check_solution(
      "Let me think.\nStep 1: 3 * 5 = 15\nStep 2: 12 + 15 = 27\nStep 3: 27 - 7 = 20\nAnswer: 20", p);
  EXPECT_EQ(c.steps.size(), 3u);
  EXPECT_TRUE(c.all_steps_correct);
  EXPECT_TRUE(c.answer_correct);
  const SolutionCheck wrong = check_solution("Step 1: 12 - 7 = 5\nAnswer: 5\n", p);
  EXPECT_FALSE(wrong.answer_correct);
  EXPECT_FALSE(check_solution("", p).answer_correct);
}

}  // namespace
}  // namespace agentkv::prm
