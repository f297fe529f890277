// Where a collective round computes its block's master with EngineOptions::master_context = kAgent
// (engine/collective_round.h), on both real models:
//   - in the context of the sharing member with the fewest tokens left to prefill: a member whose
//     context the prefix cache already holds is chosen over the first, and the master then costs only
//     what the cache does not hold (the same agent's earlier master, in a society that keeps its order);
//   - where a whole agent context as the master would make the round's first wave take fewer turns (or
//     not fit beside its largest turn) than [BOS][block], the round runs with [BOS][block] and says so.

#include "engine/collective_round.h"
#include "engine_test_util.h"

namespace agentkv {
namespace {

using testing::genesis_prompts;
using testing::greedy_request;
using testing::real_model;
using testing::run_one_request;

class CollectiveRoundMasterTest : public ::testing::TestWithParam<std::string> {};

constexpr int kBlock = 16;

// Four agents, each with a private prefix of a few hundred tokens, then the same chronicle, then its
// own instruction.
std::vector<RoundTurn> round_turns(const LoadedModel& lm) {
  const Tokenizer& tok = *lm.tokenizer;
  const std::vector<int32_t> block = tok.encode(genesis_prompts(1, 1200, 1200, 577)[0], false, false);
  const std::vector<std::string> notes = genesis_prompts(4, 700, 1000, 3001);
  std::vector<RoundTurn> turns;
  const char* who[] = {"Ada, a baker", "Bram, a smith", "Cleo, a teacher", "Dov, a sailor"};
  for (size_t i = 0; i < 4; ++i) {
    RoundTurn t;
    t.params = greedy_request(lm, std::string("You are ") + who[i] + ". Your notes:\n" + notes[i] +
                                      "\nRead the chronicle:\n", 6);
    const int64_t start = int64_t(t.params.prompt.size());
    t.params.prompt.insert(t.params.prompt.end(), block.begin(), block.end());
    t.segment = {start, start + int64_t(block.size())};
    const std::vector<int32_t> own = tok.encode("\nIn one sentence, as " + std::string(who[i]) + ":", false, false);
    t.params.prompt.insert(t.params.prompt.end(), own.begin(), own.end());
    turns.push_back(std::move(t));
  }
  return turns;
}

CollectiveRoundResult run_round(Engine& e, const std::vector<RoundTurn>& turns) {
  return testing::run_collective_round(e, turns, 0.15);
}

std::unique_ptr<Engine> make_engine(const LoadedModel& lm, ThreadPool& pool, MasterContext where, int64_t blocks) {
  EngineOptions eo;
  eo.kv.block_size = kBlock;
  eo.kv.mem_bytes = KvArena::bytes_per_block(lm.config(), kBlock) * blocks;
  eo.master_context = where;
  auto e = Engine::create(lm, eo, pool);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? std::move(e).value() : nullptr;
}

void release_all(Engine& e, const CollectiveRoundResult& r) {
  for (const RoundTurnOutcome& o : r.turns) e.release_retained(o.answer.retained_kv);
  EXPECT_EQ(e.kv_budget().pinned_blocks, 0) << "a master or diff outlived its last agent";
}

TEST_P(CollectiveRoundMasterTest, TheMasterIsTheMemberWhoseContextThePrefixCacheHolds) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const std::vector<RoundTurn> turns = round_turns(lm);

  // Nothing cached: the master is a whole agent context up to the block's end (the shortest one).
  auto cold = make_engine(lm, pool, MasterContext::kAgent, 4096);
  ASSERT_TRUE(cold);
  int64_t shortest = turns[0].segment.second;
  for (const RoundTurn& t : turns) shortest = std::min(shortest, t.segment.second);
  const CollectiveRoundResult c = run_round(*cold, turns);
  ASSERT_TRUE(c.status.ok()) << c.status.error();
  EXPECT_EQ(c.sharing.master_context, "agent");
  EXPECT_EQ(c.sharing.agents, 4);
  // (less when the master's own agent's prefix, prefilled in the same step, is cached by then)
  EXPECT_LE(c.sharing.master_tokens_computed, shortest);
  EXPECT_GE(c.sharing.master_tokens_computed, turns[0].segment.second - turns[0].segment.first);
  release_all(*cold, c);

  // The third agent's context up to the block's end prefilled beforehand (as the previous round's
  // master would leave it): the master is computed in that context, from the cache.
  auto warm = make_engine(lm, pool, MasterContext::kAgent, 4096);
  ASSERT_TRUE(warm);
  RequestParams before = turns[2].params;
  before.prompt.resize(size_t(turns[2].segment.second));
  before.max_tokens = 0;
  run_one_request(*warm, before);
  const int64_t cached = cached_prefix_tokens(warm->kv(), before.prompt, 0);
  ASSERT_GT(cached, turns[2].segment.second - kBlock - 1);
  const CollectiveRoundResult w = run_round(*warm, turns);
  ASSERT_TRUE(w.status.ok()) << w.status.error();
  EXPECT_EQ(w.sharing.master_context, "agent");
  EXPECT_EQ(w.sharing.master_tokens_computed, turns[2].segment.second - cached)
      << "the master was not computed in the cached agent's context";
  EXPECT_LT(w.sharing.master_tokens_computed, kBlock + 1);
  // That agent's copy of the block is its exact KV: it recomputes nothing it would not anyway, and its
  // answer is the exact context's.
  auto exact = make_engine(lm, pool, MasterContext::kBlock, 4096);
  ASSERT_TRUE(exact);
  const testing::RequestOut alone = run_one_request(*exact, turns[2].params);
  EXPECT_EQ(w.turns[2].answer.tokens, alone.at(0).tokens) << "the master's own agent answers as from its exact context";
  release_all(*warm, w);
  std::printf("%s: master from nothing cached %lld tokens, from the cached agent's context %lld tokens\n",
              GetParam().c_str(), (long long)c.sharing.master_tokens_computed,
              (long long)w.sharing.master_tokens_computed);
}

// The next round of the same agents: each resumes its resident context, reads a new chronicle and
// answers again. An agent's whole context (the first round's, its answer, the new chronicle) is the
// master with kAgent.
std::vector<RoundTurn> next_round(const LoadedModel& lm, const std::vector<RoundTurn>& before,
                                  const CollectiveRoundResult& r) {
  const Tokenizer& tok = *lm.tokenizer;
  const std::vector<int32_t> block = tok.encode(genesis_prompts(1, 1200, 1200, 4409)[0], false, false);
  std::vector<RoundTurn> turns;
  for (size_t i = 0; i < before.size(); ++i) {
    RoundTurn t;
    t.params = before[i].params;
    const std::vector<int32_t>& answer = r.turns[i].answer.tokens;
    t.params.prompt.insert(t.params.prompt.end(), answer.begin(), answer.end());
    const std::vector<int32_t> read = tok.encode("\nRead the next chronicle:\n", false, false);
    t.params.prompt.insert(t.params.prompt.end(), read.begin(), read.end());
    const int64_t start = int64_t(t.params.prompt.size());
    t.params.prompt.insert(t.params.prompt.end(), block.begin(), block.end());
    t.segment = {start, start + int64_t(block.size())};
    const std::vector<int32_t> own = tok.encode("\nAnd now, in one sentence:", false, false);
    t.params.prompt.insert(t.params.prompt.end(), own.begin(), own.end());
    t.params.kv_from = r.turns[i].answer.retained_kv;
    turns.push_back(std::move(t));
  }
  return turns;
}

TEST_P(CollectiveRoundMasterTest, AnAgentMasterThatWouldShrinkTheWaveFallsBackToTheBlock) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const std::vector<RoundTurn> first = round_turns(lm);

  // Roomy: both rounds' masters in an agent's context, every turn in one wave.
  auto roomy = make_engine(lm, pool, MasterContext::kAgent, 4096);
  ASSERT_TRUE(roomy);
  const CollectiveRoundResult r1 = run_round(*roomy, first);
  ASSERT_TRUE(r1.status.ok()) << r1.status.error();
  EXPECT_EQ(r1.sharing.master_context, "agent");
  const int64_t resident = roomy->kv_budget().pinned_blocks;
  const std::vector<RoundTurn> second = next_round(lm, first, r1);
  int64_t sum = 0, largest = 0;
  for (const RoundTurn& t : second) {
    const KvDemand d = roomy->kv_demand(t.params);
    sum += d.need_blocks - d.reused_blocks + 2;
    largest = std::max(largest, d.need_blocks - d.reused_blocks + 2);
  }
  const int64_t seg = second[0].segment.second - second[0].segment.first;
  const int64_t block_master = (int64_t(lm.tokenizer->add_bos_default()) + seg + kBlock - 1) / kBlock;
  const int64_t agent_master = (second[0].segment.second + kBlock - 1) / kBlock;
  const CollectiveRoundResult r2 = run_round(*roomy, second);
  ASSERT_TRUE(r2.status.ok()) << r2.status.error();
  EXPECT_EQ(r2.sharing.master_context, "agent");
  EXPECT_EQ(r2.sharing.waves, 1);
  release_all(*roomy, r2);

  // A budget whose second round holds every turn at once beside [BOS][block] (and the room a wave keeps
  // for compacting), but not beside an agent's whole context: that round's masters are [BOS][block].
  const int64_t budget = resident + sum + (largest + 1) + block_master + 2;
  ASSERT_GT(agent_master, block_master + 2) << "an agent's context must cost the wave a turn";
  auto tight = make_engine(lm, pool, MasterContext::kAgent, budget);
  ASSERT_TRUE(tight);
  const CollectiveRoundResult t1 = run_round(*tight, first);
  ASSERT_TRUE(t1.status.ok()) << t1.status.error();
  EXPECT_EQ(t1.sharing.master_context, "agent");
  ASSERT_EQ(tight->kv_budget().pinned_blocks, resident);
  for (size_t i = 0; i < first.size(); ++i)
    ASSERT_EQ(t1.turns[i].answer.tokens, r1.turns[i].answer.tokens) << "agent " << i;
  const CollectiveRoundResult t2 = run_round(*tight, next_round(lm, first, t1));
  ASSERT_TRUE(t2.status.ok()) << t2.status.error();
  EXPECT_EQ(t2.sharing.mode, "tokendance");
  EXPECT_EQ(t2.sharing.master_context, "block");
  EXPECT_EQ(t2.sharing.agents, 4);
  EXPECT_EQ(t2.sharing.waves, 1);
  EXPECT_EQ(t2.sharing.master_tokens_computed, int64_t(lm.tokenizer->add_bos_default()) + seg);
  release_all(*tight, t2);
  std::printf("%s: second round's master in an agent's context %lld blocks, [BOS][block] %lld; budget %lld blocks "
              "(%lld resident): %s\n",
              GetParam().c_str(), (long long)agent_master, (long long)block_master, (long long)budget,
              (long long)resident, t2.sharing.master_context.c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, CollectiveRoundMasterTest, ::testing::Values("smollm2", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace agentkv
