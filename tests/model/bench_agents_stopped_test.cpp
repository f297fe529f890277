// bench-agents when a round fails part-way (SmolLM2, long-history-society, prefix caching, 2 agents x
// 3 rounds, 8-message digests): with a 9 MiB budget rounds 1 and 2 run (prompts of ~250 and ~330 tokens)
// and round 3's ~415-token prompt can never fit 25 blocks. The run fails with the budget's error, and
// what ran is still reported: the two completed rounds, the error that stopped the third, no later mode.
#include "lab/agents/bench_agents.h"

#include "engine_test_util.h"

namespace agentkv {
namespace {

using testing::real_model;

TEST(BenchAgentsStopped, AFailedRoundKeepsTheRoundsBeforeIt) {
  ThreadPool pool(2);
  BenchAgentsOptions o;
  o.workload = "long-history-society";
  o.workload_opt.n_agents = 2;
  o.workload_opt.n_rounds = 3;
  o.workload_opt.digest_messages = 8;
  o.modes = {"prefix", "nocache"};
  o.kv_mem = int64_t(9) << 20;
  o.quality = false;
  o.progress = false;
  BenchAgentsReport what_ran;
  auto rep = run_bench_agents(real_model("smollm2"), pool, o, &what_ran);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.code(), ErrorCode::kResourceExhausted) << rep.error();
  EXPECT_NE(rep.error().find("prefix stopped, round 3, agent 0"), std::string::npos) << rep.error();
  ASSERT_EQ(what_ran.modes.size(), 1u);  // nocache, after it, did not run
  const ModeReport& m = what_ran.modes[0];
  ASSERT_TRUE(m.stopped.has_value());
  EXPECT_EQ(m.stopped->code, ErrorCode::kResourceExhausted);
  ASSERT_EQ(m.rounds.size(), 2u);
  EXPECT_EQ(m.rounds[0].round, 1);
  EXPECT_EQ(m.rounds[1].round, 2);
  EXPECT_EQ(m.overall.prompt_tokens, m.rounds[0].prompt_tokens + m.rounds[1].prompt_tokens);
  EXPECT_EQ(m.blocks_held_after_release, -1);  // no leak check on a run that stopped
  const Json j = what_ran;
  EXPECT_EQ(j["modes"][0]["stopped"]["after_rounds"], 2);
  EXPECT_NE(bench_agents_table(what_ran).find("prefix        stopped after 2 rounds: round 3, agent 0"),
            std::string::npos);
  // Without a place for what ran, the same error.
  auto plain = run_bench_agents(real_model("smollm2"), pool, o);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error(), rep.error());
}

}  // namespace
}  // namespace agentkv
