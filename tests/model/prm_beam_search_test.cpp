// Step-level beam search on SmolLM2, one problem, small width: the KV-PRM-guided search and the
// text-PRM-guided one make the same choices (same head, bit-identical scores, same seeded
// proposals), and the search's bookkeeping adds up. A fixed probe reading block 4 keeps the text
// PRM's re-encoding short (any probe will do for equality).
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.h"
#include "lab/prm/step_beam.h"
#include "lab/prm/step_checker.h"

namespace agentkv::prm {
namespace {

// A small beam (width 2, 24-token lines, 256 MiB of KV) with the given rounds and sampling.
BeamOptions small_beam(int max_steps, int n, float temperature, uint64_t seed) {
  BeamOptions o;
  o.width = 2;
  o.max_steps = max_steps;
  o.sampling.n = n;
  o.sampling.temperature = temperature;
  o.sampling.max_tokens = 24;
  o.sampling.seed = seed;
  o.kv_mem_bytes = int64_t(256) << 20;
  return o;
}

TEST(StepBeamSearch, KvPrmAndTextPrmGuideTheSameSearch) {
  const LoadedModel& lm = testing::real_model("smollm2");
  ThreadPool pool(0);
  auto head = make_verify_head(*lm.tokenizer);
  ASSERT_TRUE(head.ok()) << head.error();
  StepProbe probe;
  probe.layer = 4;
  for (int i = 0; i < lm.config().n_embd; ++i) {
    probe.mean.push_back(0);
    probe.inv_std.push_back(1);
    probe.weight.push_back(std::cos(0.11 * i));
  }
  head->probe = probe;
  head->feature_layer = probe.layer;
  head->read_logits = false;
  const std::vector<ArithProblem> problems = {generate_arith_problem(arith_seed(ArithSplit::kHeldOut, 0))};
  const BeamOptions o = small_beam(2, 2, 0.8f, 5);
  auto kv = step_beam_search(lm, problems, BeamScorer::kKvPrm, *head, o, pool);
  ASSERT_TRUE(kv.ok()) << kv.error();
  auto text = step_beam_search(lm, problems, BeamScorer::kTextPrm, *head, o, pool);
  ASSERT_TRUE(text.ok()) << text.error();
  EXPECT_EQ(kv->solutions, text->solutions);
  EXPECT_EQ(kv->n_correct, text->n_correct);
  EXPECT_EQ(kv->scored_candidates, text->scored_candidates);
  ASSERT_EQ(kv->n_problems, 1);
  // Round 1 has one live beam per problem, later rounds at most `width`: lines = n * live beams.
  EXPECT_GE(kv->policy_lines, o.sampling.n);
  EXPECT_LE(kv->policy_lines, o.sampling.n * (1 + o.width * (o.max_steps - 1)));
  EXPECT_GT(kv->policy_tokens, kv->policy_lines);
  EXPECT_GT(kv->scored_candidates, 0);
  for (const auto& lines : kv->solutions) {
    ASSERT_FALSE(lines.empty());
    EXPECT_LE(lines.size(), size_t(o.max_steps));
  }
  int64_t right = 0;
  for (size_t p = 0; p < problems.size(); ++p) right += check_lines(kv->solutions[p], problems[p]).answer_correct;
  EXPECT_EQ(right, kv->n_correct);
  EXPECT_FALSE(parse_beam_scorer("vote").ok());
}

// offer_answer: after a step the policy's greedy "Answer:" line competes as a finishing candidate, the
// verifier rates answer lines like steps, and ties go to finished solutions. With a verifier that
// scores every line alike, every continuation ties the beam that stops, so each problem's solution is
// its first step and an answer.
TEST(StepBeamSearch, OfferedAnswerEndsABeamWhenMoreStepsScoreNoBetter) {
  const LoadedModel& lm = testing::real_model("smollm2");
  ThreadPool pool(0);
  auto head = make_verify_head(*lm.tokenizer);
  ASSERT_TRUE(head.ok()) << head.error();
  StepProbe probe;  // weight 0: the same score for every step
  probe.layer = 2;
  probe.mean.assign(size_t(lm.config().n_embd), 0.0);
  probe.inv_std.assign(size_t(lm.config().n_embd), 1.0);
  probe.weight.assign(size_t(lm.config().n_embd), 0.0);
  head->probe = probe;
  head->feature_layer = probe.layer;
  head->read_logits = false;
  std::vector<ArithProblem> problems;
  for (uint64_t i = 0; i < 3; ++i) problems.push_back(generate_arith_problem(arith_seed(ArithSplit::kHeldOut, i)));
  BeamOptions o = small_beam(4, 3, 0.7f, 3);
  o.offer_answer = true;
  auto kv = step_beam_search(lm, problems, BeamScorer::kKvPrm, *head, o, pool);
  ASSERT_TRUE(kv.ok()) << kv.error();
  auto text = step_beam_search(lm, problems, BeamScorer::kTextPrm, *head, o, pool);
  ASSERT_TRUE(text.ok()) << text.error();
  EXPECT_EQ(kv->solutions, text->solutions);
  int64_t stopped_after_one_step = 0;
  for (const auto& lines : kv->solutions) {
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back().rfind("Answer", 0), 0u) << lines.back();  // every beam finished
    if (lines.size() == 2 && is_step_line(lines[0])) {
      ++stopped_after_one_step;
    } else {  // no step line was proposed first: the policy answered (or wandered) at once
      EXPECT_FALSE(is_step_line(lines[0])) << lines[0];
    }
  }
  EXPECT_GE(stopped_after_one_step, 1);
  // Offered answers are policy output too: at most one per live beam and round after the first.
  EXPECT_LE(kv->policy_lines, int64_t(problems.size()) * (o.sampling.n + (o.sampling.n + 1) * o.width * (o.max_steps - 1)));
  // Log-probability has no view of when the steps are done: it is offered nothing.
  auto lp = step_beam_search(lm, problems, BeamScorer::kLogprob, *head, o, pool);
  ASSERT_TRUE(lp.ok()) << lp.error();
  BeamOptions plain = o;
  plain.offer_answer = false;
  auto lp_plain = step_beam_search(lm, problems, BeamScorer::kLogprob, *head, plain, pool);
  ASSERT_TRUE(lp_plain.ok()) << lp_plain.error();
  EXPECT_EQ(lp->solutions, lp_plain->solutions);
  EXPECT_EQ(lp->policy_lines, lp_plain->policy_lines);
}

}  // namespace
}  // namespace agentkv::prm
