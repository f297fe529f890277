// A collective round whose turns do not all fit the KV budget at once runs in waves
// (engine/collective_round.h) instead of being refused, on both real models. The budget is sized
// from a roomy run of the same round: too small for every turn's dense context beside the master,
// large enough for one more turn beside everything a finished wave keeps pinned. The waves must
// change nothing an agent sees: the selective recompute and batched decode are batch-invariant, so
// every answer, every agent's recomputed share and every stored diff equals the one-wave round's,
// and releasing every agent afterwards leaves no block pinned.

#include "engine/collective_round.h"
#include "engine_test_util.h"

namespace agentkv {
namespace {

using testing::genesis_prompts;
using testing::greedy_request;
using testing::real_model;

class CollectiveRoundWavesTest : public ::testing::TestWithParam<std::string> {};

std::vector<RoundTurn> society_turns(const LoadedModel& lm) {
  const Tokenizer& tok = *lm.tokenizer;
  const std::vector<int32_t> block = tok.encode(genesis_prompts(1, 2000, 2000, 577)[0], false, false);
  std::vector<RoundTurn> turns;
  for (const char* who : {"Ada, a baker", "Bram, a smith", "Cleo, a teacher", "Dov, a sailor", "Eve, a nurse",
                          "Fen, a farmer", "Gus, a potter"}) {
    RoundTurn t;
    t.params = greedy_request(lm, std::string("You are ") + who + ". Read the chronicle and say what matters:\n", 8);
    const int64_t start = int64_t(t.params.prompt.size());
    t.params.prompt.insert(t.params.prompt.end(), block.begin(), block.end());
    t.segment = {start, start + int64_t(block.size())};
    const std::vector<int32_t> own = tok.encode("\nIn one sentence, as " + std::string(who) + ":", false, false);
    t.params.prompt.insert(t.params.prompt.end(), own.begin(), own.end());
    turns.push_back(std::move(t));
  }
  return turns;
}

CollectiveRoundResult run_round(Engine& e, const std::vector<RoundTurn>& turns) {
  return testing::run_collective_round(e, turns, 0.15);
}

TEST_P(CollectiveRoundWavesTest, ATightBudgetRunsTheRoundInWavesWithTheSameAnswersAndDiffs) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const std::vector<RoundTurn> turns = society_turns(lm);
  constexpr int kBlock = 16;
  const int64_t bpb = KvArena::bytes_per_block(lm.config(), kBlock);

  EngineOptions roomy_opt;
  roomy_opt.kv.block_size = kBlock;
  roomy_opt.kv.mem_bytes = bpb * 4096;
  auto roomy = Engine::create(lm, roomy_opt, pool);
  ASSERT_TRUE(roomy.ok()) << roomy.error();
  int64_t turn_max = 0, turn_sum = 0;
  for (const RoundTurn& t : turns) {
    const int64_t b = (*roomy)->kv_demand(t.params).need_blocks + 2;  // + the partial blocks a blend copies
    turn_max = std::max(turn_max, b);
    turn_sum += b;
  }
  const int64_t seg = turns[0].segment.second - turns[0].segment.first;
  const int64_t masters = (int64_t(lm.tokenizer->add_bos_default()) + seg + kBlock - 1) / kBlock;
  const CollectiveRoundResult one = run_round(**roomy, turns);
  ASSERT_TRUE(one.status.ok()) << one.status.error();
  EXPECT_EQ(one.sharing.waves, 1);
  const int64_t kept = (*roomy)->kv_budget().pinned_blocks;  // every compacted context (and the master they share)
  const EngineMetrics roomy_m = (*roomy)->metrics();

  // Room for a few turns beside the master (and the room a wave keeps for compacting), and for the
  // last turn and its compaction beside everything kept: waves.
  const int64_t budget = std::max(masters + 4 * turn_max, kept + 2 * turn_max + 2);
  ASSERT_LT(budget - masters, turn_sum) << "the budget must be too small for every turn at once";
  EngineOptions tight_opt = roomy_opt;
  tight_opt.kv.mem_bytes = bpb * budget;
  auto tight = Engine::create(lm, tight_opt, pool);
  ASSERT_TRUE(tight.ok()) << tight.error();
  const CollectiveRoundResult waved = run_round(**tight, turns);
  ASSERT_TRUE(waved.status.ok()) << waved.status.error();
  EXPECT_GT(waved.sharing.waves, 1);
  EXPECT_EQ(waved.sharing.mode, "tokendance");
  EXPECT_EQ(waved.sharing.agents, int(turns.size()));
  EXPECT_EQ(waved.sharing.recomputed_tokens, one.sharing.recomputed_tokens);
  EXPECT_EQ(waved.sharing.master_tokens_computed, one.sharing.master_tokens_computed) << "one master for all waves";
  ASSERT_EQ(waved.turns.size(), one.turns.size());
  for (size_t i = 0; i < turns.size(); ++i) {
    EXPECT_TRUE(waved.turns[i].shared) << "agent " << i;
    EXPECT_EQ(waved.turns[i].recomputed, one.turns[i].recomputed) << "agent " << i;
    EXPECT_EQ(waved.turns[i].answer.tokens, one.turns[i].answer.tokens) << "agent " << i;
  }
  const EngineMetrics m = (*tight)->metrics();
  EXPECT_EQ(m.retained_compact, int64_t(turns.size())) << "every new context stored as master + diff";
  EXPECT_EQ(m.retained_diff_bytes, roomy_m.retained_diff_bytes);
  EXPECT_EQ(m.retained_compact_blocks, roomy_m.retained_compact_blocks);
  EXPECT_EQ((*tight)->kv_budget().pinned_blocks, kept);
  std::printf("%s: %zu turns of %lld blocks at most in a %lld-block budget (master %lld): %d waves\n",
              GetParam().c_str(), turns.size(), (long long)turn_max, (long long)budget, (long long)masters,
              waved.sharing.waves);

  for (const RoundTurnOutcome& o : waved.turns) (*tight)->release_retained(o.answer.retained_kv);
  EXPECT_EQ((*tight)->kv_budget().pinned_blocks, 0) << "a master or diff outlived its last agent";
}

// A turn that cannot fit beside the master even alone is refused before any work, naming the turn.
TEST_P(CollectiveRoundWavesTest, ATurnThatCanNeverFitIsRefusedBeforeAnyWork) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const std::vector<RoundTurn> turns = society_turns(lm);
  constexpr int kBlock = 16;
  EngineOptions eo;
  eo.kv.block_size = kBlock;
  auto probe = Engine::create(lm, eo, pool);
  ASSERT_TRUE(probe.ok()) << probe.error();
  const int64_t turn = (*probe)->kv_demand(turns[0].params).need_blocks;
  eo.kv.mem_bytes = KvArena::bytes_per_block(lm.config(), kBlock) * (turn + 2);  // the turn, not its master too
  auto e = Engine::create(lm, eo, pool);
  ASSERT_TRUE(e.ok()) << e.error();
  const CollectiveRoundResult r = run_round(**e, turns);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), ErrorCode::kResourceExhausted) << r.status.error();
  EXPECT_NE(r.status.error().find("largest turn of the round of 7 agents"), std::string::npos) << r.status.error();
  EXPECT_EQ((*e)->metrics().tokens_prefilled, 0u);
  EXPECT_EQ((*e)->kv_budget().pinned_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(BothModels, CollectiveRoundWavesTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
