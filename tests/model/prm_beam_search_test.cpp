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
  BeamOptions o;
  o.width = 2;
  o.max_steps = 2;
  o.sampling.n = 2;
  o.sampling.temperature = 0.8f;
  o.sampling.max_tokens = 24;
  o.sampling.seed = 5;
  o.kv_mem_bytes = int64_t(256) << 20;
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

}  // namespace
}  // namespace agentkv::prm
