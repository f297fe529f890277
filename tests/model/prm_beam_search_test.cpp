// Step-level beam search on SmolLM2, one problem, small width: the KV-PRM-guided search and the
// text-PRM-guided one make the same choices (same head, bit-identical scores, same seeded
// proposals), and the search's bookkeeping adds up. A fixed probe reading block 4 keeps the text
// PRM's re-encoding short (any probe will do for equality).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "model_test_util.h"
#include "lab/prm/step_beam.h"
#include "lab/prm/step_checker.h"
#include "lab/prm/step_labels.h"

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

// fit-prm --offered-answers: the labelled set gains, after each reference prefix of at least one step,
// exactly one offered answer line (the answerer's, starting with the "Answer:" tokens), labelled by the
// answer it states, and nothing else changes: every other example is the set's without them, in order.
TEST(StepLabels, OfferedAnswersAddOneAnswerLinePerPrefixAndChangeNothingElse) {
  const LoadedModel& lm = testing::real_model("smollm2");
  ThreadPool pool(0);
  std::vector<ArithProblem> problems;
  for (uint64_t i = 0; i < 2; ++i) problems.push_back(generate_arith_problem(arith_seed(ArithSplit::kTrain, i)));
  ProposeOptions po;
  po.n = 2;
  po.temperature = 0.7f;
  po.max_tokens = 24;
  po.seed = 11;
  po.kv_mem_bytes = int64_t(256) << 20;
  EXPECT_FALSE(sample_labelled_steps(lm, problems, po, pool, false, true).ok());  // offered needs answer lines
  auto plain = sample_labelled_steps(lm, problems, po, pool, true, false);
  ASSERT_TRUE(plain.ok()) << plain.error();
  auto offered = sample_labelled_steps(lm, problems, po, pool, true, true);
  ASSERT_TRUE(offered.ok()) << offered.error();
  EXPECT_EQ(plain->n_offered, 0);
  int64_t prefixes = 0;
  for (const auto& lines : offered->ref_lines) prefixes += int64_t(lines.size());
  EXPECT_EQ(offered->n_offered, prefixes);
  EXPECT_EQ(offered->n_proposals, plain->n_proposals + prefixes);
  const std::vector<int32_t> prefix = lm.tokenizer->encode("Answer:", false, false);
  std::map<std::pair<size_t, size_t>, int> offered_at;  // (problem, k) -> offered lines there
  int right_after_whole_reference = 0;
  size_t i = 0;
  for (const LabelledStep& s : offered->steps) {
    if (i < plain->steps.size() && s.problem == plain->steps[i].problem && s.k == plain->steps[i].k &&
        s.proposal.tokens == plain->steps[i].proposal.tokens) {
      EXPECT_EQ(s.label, plain->steps[i].label);
      ++i;
      continue;
    }
    ++offered_at[{s.problem, s.k}];
    EXPECT_GE(s.k, 1u);
    EXPECT_TRUE(is_answer_line(s.proposal.text)) << s.proposal.text;
    ASSERT_GE(s.proposal.tokens.size(), prefix.size());
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), s.proposal.tokens.begin())) << s.proposal.text;
    const SolutionCheck check = check_lines(step_prefix_lines(offered->problems[s.problem], s.k, s.proposal.text),
                                            offered->problems[s.problem]);
    EXPECT_EQ(s.label, check.answer_correct ? 1 : 0) << s.proposal.text;
    if (s.k == offered->ref_lines[s.problem].size()) right_after_whole_reference += s.label;
  }
  EXPECT_EQ(i, plain->steps.size());  // every example of the plain set, in order
  EXPECT_EQ(int64_t(offered_at.size()), prefixes);
  for (const auto& [where, n] : offered_at) EXPECT_EQ(n, 1) << where.first << " " << where.second;
  // After the whole reference the policy states its last result: right for at least one of the two.
  EXPECT_GE(right_after_whole_reference, 1);
}

}  // namespace
}  // namespace agentkv::prm
