// Quality of selective recompute against the recompute ratio R, on round 0 of generative-agents
// (four residents with 300-800-token private profiles, one shared announcement). For each R the
// agents' segment KV comes from the master through selective_recompute, then each agent's prompt and
// the first tokens of its greedy reply under full prefill are fed (teacher-forced), and the
// next-token distributions over the reply are compared with full prefill: mean / p95 KL and argmax
// agreement. The table is printed for the quality curve; the test asserts what must hold whatever
// the numbers: R = 1 is exact, and recomputing half the tokens is closer than recomputing none.
#include <cstdio>

#include "share_round_util.h"

namespace agentkv {
namespace {

constexpr int kReplyTokens = 16;

class RecomputeSweepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RecomputeSweepTest, QualityAgainstRatio) {
  const LoadedModel& lm = testing::real_model(GetParam());
  const Model& m = *lm.model;
  ThreadPool pool(0);
  testing::RoundTokens r = testing::round_tokens(lm, "generative-agents", 4, 1);
  std::vector<size_t> everyone, reply_from;
  for (size_t a = 0; a < r.n_agents(); ++a) {
    everyone.push_back(a);
    reply_from.push_back(r.prompt[a].size() - 1);  // the prompt's last row predicts the reply's first token
  }
  testing::extend_prompts_with_greedy_reply(m, r, kReplyTokens, pool);
  testing::RoundLayout L(r);
  KvArena kv(m.config(), testing::kRoundBlockSize, L.n_blocks);
  std::vector<std::vector<float>> ref;
  for (size_t a = 0; a < r.n_agents(); ++a) ref.push_back(testing::reference_prompt_logits(m, kv, L, r, a, pool));
  const SegmentMaster master = testing::compute_master(lm, kv, L, r, pool);
  testing::prefill_prefixes(m, kv, L, r, everyone, pool);
  size_t prefix_tokens = 0;
  for (auto& p : r.prefix) prefix_tokens += p.size();

  std::printf("[%s] generative-agents round 0: %zu agents, prefixes %zu tokens in all, segment %zu tokens, "
              "%d reply positions each\n",
              GetParam().c_str(), r.n_agents(), prefix_tokens, r.segment.size(), kReplyTokens);
  std::printf("[%s]     R  recomputed  mean KL   p95 KL   max KL  agreement\n",
              GetParam().c_str());
  std::vector<testing::Quality> by_ratio;
  const std::vector<double> ratios = {0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1};
  for (double ratio : ratios) {
    RecomputeOptions o;
    o.ratio = ratio;
    std::vector<AgentRecompute> diffs;
    const auto got = testing::reused_prompt_logits(lm, kv, L, r, master, everyone, o, pool, &diffs);
    const testing::Quality q = testing::compare(ref, got, m.config().n_vocab, reply_from);
    size_t recomputed = 0;
    for (auto& d : diffs) recomputed += d.recomputed_slots.size();
    std::printf("[%s] %5.2f  %9.3f  %8.4f %8.4f %8.4f  %9.3f\n", GetParam().c_str(), ratio,
                double(recomputed) / double(r.n_agents() * r.segment.size()), q.mean_kl, q.p95_kl, q.max_kl,
                q.agreement);
    ASSERT_EQ(q.rows, r.n_agents() * size_t(kReplyTokens));
    by_ratio.push_back(q);
  }
  EXPECT_EQ(by_ratio.back().max_kl, 0.0) << "R = 1 must be full prefill";
  EXPECT_EQ(by_ratio.back().agreement, 1.0);
  EXPECT_LT(by_ratio[6].mean_kl, by_ratio[0].mean_kl) << "R = 0.5 is no closer than R = 0";
}

INSTANTIATE_TEST_SUITE_P(Models, RecomputeSweepTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
