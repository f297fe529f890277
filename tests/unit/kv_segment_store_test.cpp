// The segment cache (kv/segment_store.h) with a hand-made tiny geometry (no model): content lookup
// verified by token ids, supersession of a continued context, LRU eviction, the blocks it holds
// and that they go back to the pool when it lets go; and cached_prefix_tokens, the side-effect-free
// probe of exact prefix hits.
#include "kv/segment_store.h"

#include "tiny_kv_config.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

namespace agentkv {
namespace {

using Tokens = std::vector<int32_t>;

using testing_kv::tiny_config;

using testing_kv::kBlock;
using testing_kv::make_manager;

std::shared_ptr<const KvSequence> context(KvManager& m, const Tokens& t) {
  auto s = std::make_shared<KvSequence>(m);
  EXPECT_TRUE(s->reserve(int64_t(t.size())));
  s->commit(t);
  return s;
}

Tokens cat(std::initializer_list<Tokens> parts) {
  Tokens out;
  for (const Tokens& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(SegmentStore, FindsASegmentByItsTokensAtAnyPosition) {
  auto m = make_manager(64);
  SegmentStore store;
  const Tokens sys_a{1, 2, 3}, msg{50, 51, 52, 53, 54}, other{60, 61};
  store.add(context(*m, cat({sys_a, msg, other})), std::vector<std::pair<int64_t, int64_t>>{{3, 8}, {8, 10}});
  auto hits = store.find(msg);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].slot, 3);
  EXPECT_TRUE(store.find(Tokens{50, 51, 52, 53, 55}).empty());  // one token different: not the segment
  EXPECT_TRUE(store.find(Tokens{50, 51, 52, 53}).empty());      // a prefix of it: not the segment
  EXPECT_EQ(store.find(other).size(), 1u);
}

TEST(SegmentStore, MostRecentHitFirstAndTouchReorders) {
  auto m = make_manager(64);
  SegmentStore store;
  const Tokens msg{50, 51, 52, 53};
  auto a = context(*m, cat({Tokens{1}, msg}));
  auto b = context(*m, cat({Tokens{2, 2}, msg}));
  store.add(a, std::vector<std::pair<int64_t, int64_t>>{{1, 5}});
  store.add(b, std::vector<std::pair<int64_t, int64_t>>{{2, 6}});
  auto hits = store.find(msg);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].context, b);
  store.touch(a.get());
  EXPECT_EQ(store.find(msg)[0].context, a);
  ASSERT_TRUE(store.evict_lru());  // b is now the least recently used
  ASSERT_EQ(store.find(msg).size(), 1u);
  EXPECT_EQ(store.find(msg)[0].context, a);
}

TEST(SegmentStore, ContinuedContextSupersedesTheOldOne) {
  auto m = make_manager(64);
  SegmentStore store;
  const Tokens turn1 = cat({Tokens{1, 2, 3}, Tokens{50, 51, 52}, Tokens{9, 9}});  // ..., answer
  store.add(context(*m, turn1), std::vector<std::pair<int64_t, int64_t>>{{3, 6}});
  // The next turn holds the first through its last segment (not its answer) and more.
  const Tokens turn2 = cat({Tokens{1, 2, 3}, Tokens{50, 51, 52}, Tokens{7, 70, 71, 72}});
  store.add(context(*m, turn2), std::vector<std::pair<int64_t, int64_t>>{{3, 6}, {7, 10}});
  EXPECT_EQ(store.n_contexts(), 1u);
  EXPECT_EQ(store.find(Tokens{50, 51, 52}).size(), 1u);
  // Another agent's context (another prefix) is kept beside it.
  store.add(context(*m, cat({Tokens{4}, Tokens{50, 51, 52}})), std::vector<std::pair<int64_t, int64_t>>{{1, 4}});
  EXPECT_EQ(store.n_contexts(), 2u);
  EXPECT_EQ(store.longest_prefix(cat({turn2, Tokens{99}}), 0).tokens, int64_t(turn2.size()));
}

TEST(SegmentStore, HoldsBlocksUntilEvictedAndCapsItsContexts) {
  auto m = make_manager(16);
  const int64_t free0 = m->pool().num_free();
  SegmentStore store(2);
  Tokens t(8);
  for (int i = 0; i < 3; ++i) {
    std::iota(t.begin(), t.end(), 100 * (i + 1));
    store.add(context(*m, t), std::vector<std::pair<int64_t, int64_t>>{{0, 8}});
  }
  EXPECT_EQ(store.n_contexts(), 2u);  // the oldest went beyond the cap
  EXPECT_EQ(store.n_blocks(), 4);
  EXPECT_EQ(m->pool().num_free(), free0 - 4);
  store.clear();
  EXPECT_EQ(m->pool().num_free(), free0);
  EXPECT_FALSE(store.evict_lru());
}

TEST(CachedPrefixTokens, AgreesWithMatchPrefixWithoutTakingReferences) {
  auto m = make_manager(16);
  Tokens t(10);
  std::iota(t.begin(), t.end(), 7);
  { auto s = context(*m, t); }  // released: its two full blocks stay cached
  const auto before = m->pool().stats();
  EXPECT_EQ(cached_prefix_tokens(*m, t, 0), 8);
  EXPECT_EQ(cached_prefix_tokens(*m, t, 1), 0);  // another salt
  EXPECT_EQ(m->pool().stats().lookups, before.lookups);
  EXPECT_EQ(m->pool().num_free(), before.n_free);
  KvSequence s(*m);
  EXPECT_EQ(s.match_prefix(t), 8);
}

}  // namespace
}  // namespace agentkv
