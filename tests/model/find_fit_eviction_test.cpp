// bench-agents --find-fit's prefix-mode criterion on SmolLM2 (long-history-society, 3 rounds, 6
// agents): prefix caching keeps no agent's context between rounds, so a budget too small for every
// history evicts some and the next round prefills them again, a lost hit rather than a preemption.
// The bench counts a turn that reused fewer tokens than the whole blocks its prompt shares with the
// agent's last one, and find-fit fails such a trial: with room for every history none is counted;
// with 60 MiB (measured: 7 such turns, the last round's hit rate 7.5% against ~73% with room) they
// are, and the search settles below that count.
#include "lab/agents/bench_agents.h"

#include "engine_test_util.h"

namespace agentkv {
namespace {

using testing::real_model;

BenchAgentsOptions history_options(int64_t kv_mem) {
  BenchAgentsOptions o;
  o.workload = "long-history-society";
  o.workload_opt.n_agents = 6;
  o.workload_opt.n_rounds = 3;
  o.workload_opt.digest_messages = 4;
  o.modes = {"prefix"};
  o.kv_mem = kv_mem;
  o.quality = false;
  o.progress = false;
  return o;
}

int64_t evicted(const BenchAgentsReport& r) {
  int64_t n = 0;
  for (const RoundStats& rs : r.modes.at(0).rounds) n += rs.evicted_agents;
  return n;
}

TEST(FindFitEviction, PrefixHistoriesEvictedOnlyWhenTheBudgetCannotHoldThem) {
  ThreadPool pool(2);
  auto roomy = run_bench_agents(real_model("smollm2"), pool, history_options(int64_t(1) << 30));
  ASSERT_TRUE(roomy.ok()) << roomy.error();
  EXPECT_EQ(evicted(*roomy), 0);
  EXPECT_GT(roomy->modes.at(0).rounds.back().hit_rate, 0.5);
  // The search at 60 MiB: 6 agents fail on evictions alone (no preemption), and what it settles on evicts
  // nothing.
  BenchAgentsOptions search = history_options(int64_t(60) << 20);
  search.find_fit = true;
  search.fit_from = {{"prefix", 6}};
  auto found = run_bench_agents(real_model("smollm2"), pool, search);
  ASSERT_TRUE(found.ok()) << found.error();
  const ModeReport& m = found->modes.at(0);
  ASSERT_FALSE(m.fit_trials.empty());
  EXPECT_EQ(m.fit_trials.front().agents, 6);
  EXPECT_FALSE(m.fit_trials.front().fits);
  EXPECT_GT(m.fit_trials.front().evicted_agents, 0);
  EXPECT_EQ(m.fit_trials.front().preemptions, 0);
  EXPECT_LT(m.agents_fit_by_running, 6);
  for (const FitTrial& t : m.fit_trials) {
    if (t.fits) {
      EXPECT_EQ(t.evicted_agents, 0);
    }
  }
}

}  // namespace
}  // namespace agentkv
