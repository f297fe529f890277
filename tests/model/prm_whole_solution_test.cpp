// Whole-solution examples and scoring on SmolLM2 (lab/prm/solution_examples.h, best_of_n's
// PrmScoreAt::kWholeSolution): sampled solutions become one example each, labelled by their final
// answer; the KV-PRM's verify token after a whole solution read from its cache equals the text PRM's
// on the re-encoded prompt + solution bit for bit (bound zero, as prm_kv_scorer_test.cpp argues), so
// both choose the same candidates.
#include <gtest/gtest.h>

#include <cstring>

#include "model_test_util.h"
#include "lab/prm/arith_prompt.h"
#include "lab/prm/best_of_n.h"
#include "lab/prm/solution_examples.h"

namespace agentkv::prm {
namespace {

TEST(WholeSolution, ExamplesFollowTheAnswerAndKvScoresEqualTextScores) {
  const LoadedModel& lm = testing::real_model("smollm2");
  ThreadPool pool(0);
  std::vector<ArithProblem> problems;
  for (uint64_t i = 0; i < 3; ++i)
    problems.push_back(generate_arith_problem(arith_seed(ArithSplit::kHeldOut, i), ArithShape{1, 1}));
  SampleOptions so;
  so.n_samples = 4;
  so.temperature = 0.7f;
  so.max_tokens = 48;
  so.kv_mem_bytes = int64_t(256) << 20;
  auto cands = sample_candidates(lm, problems, so, pool);
  ASSERT_TRUE(cands.ok()) << cands.error();

  auto set = solution_set(lm, *cands);
  ASSERT_TRUE(set.ok()) << set.error();
  ASSERT_EQ(set->steps.size(), 12u);
  EXPECT_EQ(set->n_proposals, 12);
  const std::vector<int32_t> nl = lm.tokenizer->encode("\n", false, false);
  std::vector<std::vector<int32_t>> texts;
  size_t i = 0;
  for (size_t p = 0; p < cands->size(); ++p)
    for (const Candidate& c : (*cands)[p].candidates) {
      const LabelledStep& s = set->steps[i++];
      EXPECT_EQ(s.problem, p);
      EXPECT_EQ(s.k, 0u);
      EXPECT_EQ(s.label, c.check.answer_correct ? 1 : 0);
      EXPECT_EQ(s.label == 1, s.why.empty()) << s.why;
      // The whole solution, ending its last line (where the verify question starts).
      ASSERT_GE(s.proposal.tokens.size(), c.tokens.size());
      EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), s.proposal.tokens.begin()));
      EXPECT_EQ(lm.tokenizer->decode(s.proposal.tokens).back(), '\n');
      texts.push_back((*cands)[p].prompt);
      texts.back().insert(texts.back().end(), s.proposal.tokens.begin(), s.proposal.tokens.end());
    }
  EXPECT_EQ(set->prompts[0], (*cands)[0].prompt);

  auto head = make_verify_head(*lm.tokenizer);
  ASSERT_TRUE(head.ok()) << head.error();
  auto kv_scores = kv_score_labelled(lm, *set, *head, pool, so.kv_mem_bytes);
  ASSERT_TRUE(kv_scores.ok()) << kv_scores.error();
  KvManagerOptions ko;
  ko.prefix_caching = false;
  ko.mem_bytes = int64_t(256) << 20;
  auto scratch = KvManager::create(lm.config(), lm.fingerprint, ko);
  ASSERT_TRUE(scratch.ok()) << scratch.error();
  auto text_scores = text_prm_score(*lm.model, **scratch, texts, *head, pool);
  ASSERT_TRUE(text_scores.ok()) << text_scores.error();
  ASSERT_EQ(kv_scores->logodds.size(), texts.size());
  for (size_t k = 0; k < texts.size(); ++k)
    EXPECT_EQ(0, std::memcmp(&kv_scores->logodds[k], &text_scores->logodds[k], sizeof(float)))
        << "solution " << k << ": kv " << kv_scores->logodds[k] << " text " << text_scores->logodds[k];

  auto by_kv = best_of_n(lm, *cands, BestOfNScorer::kKvPrm, *head, pool, PrmScoreAt::kWholeSolution);
  auto by_text = best_of_n(lm, *cands, BestOfNScorer::kTextPrm, *head, pool, PrmScoreAt::kWholeSolution);
  ASSERT_TRUE(by_kv.ok()) << by_kv.error();
  ASSERT_TRUE(by_text.ok()) << by_text.error();
  EXPECT_EQ(by_kv->chosen, by_text->chosen);
  // The choice is the best whole-solution score of each problem.
  for (size_t p = 0; p < cands->size(); ++p) {
    const size_t c = by_kv->chosen[p];
    for (size_t j = 0; j < 4; ++j) EXPECT_LE(kv_scores->score[p * 4 + j], kv_scores->score[p * 4 + c]);
  }
}

// fit-prm --references: the reference solution is right by the checker, each altered copy wrong in
// the way it was altered, and the copies are the reference but for the altered numbers.
TEST(WholeSolution, ReferenceSolutionsAndTheirAlteredCopiesAreLabelledByTheChecker) {
  const LoadedModel& lm = testing::real_model("smollm2");
  std::vector<ArithProblem> problems;
  for (uint64_t i = 0; i < 6; ++i) problems.push_back(generate_arith_problem(arith_seed(ArithSplit::kTrain, i), ArithShape{1, 1}));
  auto set = new_step_set(lm, problems);
  ASSERT_TRUE(set.ok()) << set.error();
  ASSERT_TRUE(add_reference_solutions(*set, *lm.tokenizer, 3).ok());
  EXPECT_FALSE(add_reference_solutions(*set, *lm.tokenizer, 4).ok());
  std::vector<std::vector<const LabelledStep*>> by_problem(problems.size());
  for (const LabelledStep& s : set->steps) by_problem[s.problem].push_back(&s);
  EXPECT_EQ(set->n_proposals, int64_t(set->steps.size()));
  for (size_t p = 0; p < problems.size(); ++p) {
    const auto& ex = by_problem[p];
    ASSERT_GE(ex.size(), 3u) << p;  // the reference, a slipped result, (a swapped operation,) a wrong answer line
    EXPECT_EQ(ex[0]->label, 1) << ex[0]->proposal.text;
    EXPECT_EQ(ex[0]->proposal.text + "\n", format_solution(problems[p]));
    EXPECT_EQ(lm.tokenizer->decode(ex[0]->proposal.tokens), format_solution(problems[p]));
    EXPECT_EQ(ex[1]->label, 0) << ex[1]->proposal.text;
    EXPECT_EQ(ex[1]->error, StepError::kArithmetic) << ex[1]->proposal.text;
    for (size_t i = 2; i < ex.size(); ++i) {
      EXPECT_EQ(ex[i]->label, 0) << ex[i]->proposal.text;
      EXPECT_EQ(ex[i]->error, StepError::kOffTrack) << ex[i]->proposal.text;
    }
    EXPECT_NE(ex.back()->why.find("final answer"), std::string::npos) << ex.back()->why;
  }
}

}  // namespace
}  // namespace agentkv::prm
