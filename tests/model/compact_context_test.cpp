// Master–diff storage of retained contexts in the engine (Engine::compact_retained,
// engine/compact_context.h), on the real models: agents share a segment through the KV collector,
// answer, and are compacted to master + diff, in each diff format (EngineOptions::diff_format). A
// context rebuilt from the compact form equals the dense one bit for bit at every layer (with a lossy
// format: everywhere outside the segment's diff rows, which share/master_diff's test bounds);
// compacting frees blocks; and releasing the agents in any order frees the master and the
// compressed diffs exactly when the last user goes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>

#include "answered_round.h"
#include "engine/engine.h"
#include "model_test_util.h"
#include "share_test_util.h"

namespace agentkv {
namespace {

using testing::real_model;

using testing::AnsweredRound;
using testing::answer_shared_round;

class CompactContextTest : public ::testing::TestWithParam<std::tuple<std::string, DiffFormat>> {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.kv.mem_bytes = int64_t(256) << 20;
    eo.kv.block_size = 16;
    eo.diff_format = format;
    ASSERT_NO_FATAL_FAILURE(answer_shared_round(real_model(std::get<0>(GetParam())), eo, pool_, round));
  }
  const DiffFormat format = std::get<1>(GetParam());
  ThreadPool pool_{2};
  AnsweredRound round;
};

TEST_P(CompactContextTest, RebuiltContextIsBitIdenticalAndMastersLiveUntilTheLastDiff) {
  Engine& e = *round.engine;
  const auto& prefix_tokens = round.prefix_tokens;
  const auto& segment = round.segment;
  const int32_t master_start = round.master_start;
  const std::vector<uint64_t>& answers = round.answers;

  // A dense reference of every final context (forks share the blocks, so they stay as written).
  std::vector<uint64_t> dense_ref;
  for (uint64_t h : answers) dense_ref.push_back(e.fork_retained(h));
  const int64_t used_dense = e.kv().pool().stats().n_used;
  for (size_t i = 0; i < answers.size(); ++i) {
    const int32_t p = int32_t(prefix_tokens[i].size());
    ASSERT_TRUE(e.compact_retained(answers[i], p, round.master, master_start));
    EXPECT_TRUE(e.is_compact(answers[i]));
    EXPECT_EQ(e.retained(answers[i]), nullptr);
  }
  // A mismatched segment is refused and changes nothing.
  EXPECT_FALSE(e.compact_retained(dense_ref[0], 1, round.master, master_start));

  for (size_t i = 0; i < answers.size(); ++i) {
    const uint64_t rebuilt = e.fork_retained(answers[i]);
    ASSERT_NE(rebuilt, 0u);
    const KvSequence* a = e.retained(dense_ref[i]);
    const KvSequence* b = e.retained(rebuilt);
    ASSERT_EQ(a->tokens(), b->tokens());
    if (diff_format_lossless(format)) {
      EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), a->blocks(), 0, e.kv().arena(), b->blocks(), 0,
                                        int32_t(a->n_tokens())))
          << "agent " << i;
    } else {
      // Outside the segment nothing is approximated: its prefix before, its own turn after.
      const int32_t p = int32_t(prefix_tokens[i].size()), end = p + int32_t(segment.size());
      EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), a->blocks(), 0, e.kv().arena(), b->blocks(), 0, p));
      EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), a->blocks(), end, e.kv().arena(), b->blocks(), end,
                                        int32_t(a->n_tokens()) - end));
    }
    e.release_retained(rebuilt);
  }
  // Without the dense references, the compact forms hold fewer blocks than the dense contexts did.
  for (uint64_t h : dense_ref) e.release_retained(h);
  const std::vector<int32_t> master_block_ids = e.retained(round.master)->blocks();
  e.release_retained(round.master);
  const int64_t used_compact = e.kv().pool().stats().n_used;
  EXPECT_LT(used_compact, used_dense);

  // Release the agents in a shuffled order: the master's blocks stay until the last one goes.
  std::vector<size_t> order{0, 1, 2};
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (size_t k = 0; k < order.size(); ++k) {
    e.release_retained(answers[order[k]]);
    for (int32_t b : master_block_ids) EXPECT_EQ(e.kv().pool().refcount(b) > 0, k + 1 < order.size()) << "after " << k + 1;
  }
  EXPECT_EQ(e.kv().pool().stats().n_used, 0);
  EXPECT_EQ(e.n_retained(), 0u);
}

// Manager accounting in every release order: each compact context holds one reference to each master
// block its slice keeps and its diff's packed blocks alone; releasing the agents in any order drops
// exactly those references, and the last one gives back every block the compactions took.
TEST_P(CompactContextTest, EveryReleaseOrderFreesMastersAndDiffsWhenTheLastUserGoes) {
  Engine& e = *round.engine;
  const BlockPool& bp = e.kv().pool();
  const std::vector<int32_t> master_blocks = e.retained(round.master)->blocks();
  const auto counts = [&] {
    std::vector<int32_t> c;
    for (int32_t b : master_blocks) c.push_back(bp.refcount(b));
    return c;
  };
  const size_t n = round.answers.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  do {
    // Fresh compact contexts from forks of the dense answers and of the master; only they hold the forks.
    const int64_t used0 = bp.stats().n_used;
    const std::vector<int32_t> base = counts();
    const uint64_t m = e.fork_retained(round.master);
    std::vector<uint64_t> agents;
    std::vector<std::vector<int32_t>> refs(n);  // per agent: the references it added to each master block
    for (size_t i = 0; i < n; ++i) {
      const std::vector<int32_t> before = counts();
      agents.push_back(e.fork_retained(round.answers[i]));
      ASSERT_TRUE(e.compact_retained(agents.back(), int64_t(round.prefix_tokens[i].size()), m, round.master_start));
      const std::vector<int32_t> after = counts();
      int32_t kept = 0;
      for (size_t k = 0; k < master_blocks.size(); ++k) {
        refs[i].push_back(after[k] - before[k]);
        EXPECT_TRUE(refs[i][k] == 0 || refs[i][k] == 1) << "agent " << i << " master block " << k;
        kept += refs[i][k];
      }
      EXPECT_GT(kept, 0) << "agent " << i << " keeps the master blocks of its segment";
    }
    e.release_retained(m);
    std::vector<int32_t> want = base;
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < want.size(); ++k) want[k] += refs[i][k];
    EXPECT_EQ(counts(), want);
    for (size_t step = 0; step < n; ++step) {
      const size_t a = order[step];
      e.release_retained(agents[a]);
      for (size_t k = 0; k < want.size(); ++k) want[k] -= refs[a][k];
      EXPECT_EQ(counts(), want) << "after releasing agent " << a << " (step " << step << ")";
    }
    EXPECT_EQ(counts(), base);
    EXPECT_EQ(bp.stats().n_used, used0) << "every block the compactions took came back";
  } while (std::next_permutation(order.begin(), order.end()));
}

INSTANTIATE_TEST_SUITE_P(BothModelsEveryFormat, CompactContextTest, testing::both_models_every_format(),
                         testing::model_format_name);

}  // namespace
}  // namespace agentkv
