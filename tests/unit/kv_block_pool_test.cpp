// BlockPool with no model: exact block ids, refcounts, free-queue (LRU) order, prefix-index hits,
// collisions and evictions.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tiny_kv_config.h"

namespace agentkv {
namespace {

using Ids = std::vector<int32_t>;
using Tokens = std::vector<int32_t>;

constexpr uint64_t kPoolFp = 0x1234;
using testing_kv::constant_hash;


TEST(BlockPool, StartsWithEveryBlockFreeInIdOrder) {
  BlockPool p(4, 2, kPoolFp);
  EXPECT_EQ(p.free_queue(), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(p.num_free(), 4);
  const BlockPoolStats s = p.stats();
  EXPECT_EQ(s.n_blocks, 4);
  EXPECT_EQ(s.n_used, 0);
  EXPECT_EQ(s.n_free, 4);
  EXPECT_EQ(s.n_cached, 0);
  EXPECT_EQ(s.peak_used, 0);
  for (int32_t b = 0; b < 4; ++b) EXPECT_EQ(p.refcount(b), 0);
}

TEST(BlockPool, AllocatePopsHeadAndUnrefPushesTail) {
  BlockPool p(4, 2, kPoolFp);
  EXPECT_EQ(p.allocate(), 0);
  EXPECT_EQ(p.allocate(), 1);
  EXPECT_EQ(p.refcount(0), 1);
  EXPECT_EQ(p.refcount(1), 1);
  EXPECT_EQ(p.free_queue(), (Ids{2, 3}));
  p.unref(0);
  EXPECT_EQ(p.refcount(0), 0);
  EXPECT_EQ(p.free_queue(), (Ids{2, 3, 0}));
  EXPECT_EQ(p.allocate(), 2);
  EXPECT_EQ(p.allocate(), 3);
  EXPECT_EQ(p.allocate(), 0);
  EXPECT_EQ(p.allocate(), std::nullopt);
  EXPECT_EQ(p.num_free(), 0);
  EXPECT_EQ(p.stats().n_used, 4);
  EXPECT_EQ(p.stats().peak_used, 4);
}

TEST(BlockPool, SharedBlockIsFreedOnlyByTheLastUnref) {
  BlockPool p(3, 2, kPoolFp);
  const int32_t b = *p.allocate();
  p.ref(b);
  p.ref(b);
  EXPECT_EQ(p.refcount(b), 3);
  p.unref(b);
  p.unref(b);
  EXPECT_EQ(p.refcount(b), 1);
  EXPECT_EQ(p.free_queue(), (Ids{1, 2}));
  p.unref(b);
  EXPECT_EQ(p.free_queue(), (Ids{1, 2, 0}));
}

TEST(BlockPool, RefOfAFreeBlockRemovesItFromTheMiddleOfTheQueue) {
  BlockPool p(5, 2, kPoolFp);
  p.ref(2);
  EXPECT_EQ(p.refcount(2), 1);
  EXPECT_EQ(p.free_queue(), (Ids{0, 1, 3, 4}));
  p.ref(0);  // head
  p.ref(4);  // tail
  EXPECT_EQ(p.free_queue(), (Ids{1, 3}));
  p.unref(4);
  p.unref(2);
  EXPECT_EQ(p.free_queue(), (Ids{1, 3, 4, 2}));
  EXPECT_EQ(p.stats().peak_used, 3);
}

TEST(BlockPool, ReleaseUnrefsTheTableTailFirst) {
  BlockPool p(5, 2, kPoolFp);
  Ids table;
  ASSERT_TRUE(p.allocate_n(3, table));
  EXPECT_EQ(table, (Ids{0, 1, 2}));
  p.release(table);
  EXPECT_EQ(p.free_queue(), (Ids{3, 4, 2, 1, 0}));
  EXPECT_EQ(p.stats().n_used, 0);
  EXPECT_EQ(p.stats().peak_used, 3);
}

TEST(BlockPool, AllocateNIsAllOrNothing) {
  BlockPool p(3, 2, kPoolFp);
  Ids out{7};
  EXPECT_FALSE(p.allocate_n(4, out));
  EXPECT_EQ(out, (Ids{7}));
  EXPECT_EQ(p.free_queue(), (Ids{0, 1, 2}));
  EXPECT_EQ(p.stats().n_used, 0);
  EXPECT_TRUE(p.allocate_n(2, out));
  EXPECT_EQ(out, (Ids{7, 0, 1}));
  EXPECT_FALSE(p.allocate_n(2, out));
  EXPECT_EQ(out, (Ids{7, 0, 1}));
  EXPECT_TRUE(p.allocate_n(0, out));
  EXPECT_TRUE(p.allocate_n(1, out));
  EXPECT_EQ(out, (Ids{7, 0, 1, 2}));
}

TEST(BlockPool, HashDependsOnEveryInput) {
  const Tokens t{1, 2, 3, 4};
  const uint64_t h = hash_block_tokens(0, t, kPoolFp, 0);
  EXPECT_EQ(h, hash_block_tokens(0, t, kPoolFp, 0));
  std::set<uint64_t> seen{h};
  EXPECT_TRUE(seen.insert(hash_block_tokens(1, t, kPoolFp, 0)).second);              // parent
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, t, kPoolFp + 1, 0)).second);          // fingerprint
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, t, kPoolFp, 1)).second);              // salt
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, Tokens{1, 2, 4, 3}, kPoolFp, 0)).second);  // order
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, Tokens{1, 2, 3, 5}, kPoolFp, 0)).second);  // one token
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, Tokens{1, 2, 3}, kPoolFp, 0)).second);     // length
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, Tokens{1, 2, 3, 4, 0}, kPoolFp, 0)).second);
  EXPECT_TRUE(seen.insert(hash_block_tokens(0, Tokens{-1, 2, 3, 4}, kPoolFp, 0)).second);
  // Swapping the roles of the extra keys must not cancel out.
  EXPECT_NE(hash_block_tokens(5, t, 7, 0), hash_block_tokens(7, t, 5, 0));
  EXPECT_NE(hash_block_tokens(0, t, 5, 7), hash_block_tokens(0, t, 7, 5));
}

TEST(BlockPool, HashIsFixedAcrossProcesses) {
  // Values from an independent transcription of the algorithm (splitmix64 absorb, fixed seed).
  // Changing the hash invalidates every block hash shared between processes: do it on purpose only.
  EXPECT_EQ(hash_block_tokens(0, Tokens{}, 0, 0), 0xd867f200c00fac99ULL);
  EXPECT_EQ(hash_block_tokens(7, Tokens{1, 2, 3, 4}, 0xabcdef, 3), 0xbfedc7829ab13fb4ULL);
}

TEST(BlockPool, ChainHashUsesTheFingerprint) {
  BlockPool a(2, 2, 1), b(2, 2, 2);
  const Tokens t{5, 6};
  EXPECT_EQ(a.chain_hash(9, t, 3), hash_block_tokens(9, t, 1, 3));
  EXPECT_NE(a.chain_hash(9, t, 3), b.chain_hash(9, t, 3));
}

TEST(BlockPool, LookupHitsAnInsertedBlockAndRefsIt) {
  BlockPool p(4, 2, kPoolFp);
  const Tokens t{10, 11};
  const int32_t b = *p.allocate();
  const uint64_t h = p.chain_hash(0, t, 0);
  p.insert(b, h, t);
  EXPECT_TRUE(p.is_cached(b));
  EXPECT_EQ(p.stats().n_cached, 1);

  EXPECT_EQ(p.lookup(h, t), b);
  EXPECT_EQ(p.refcount(b), 2);
  p.unref(b);
  p.unref(b);
  // Free but still cached: a hit takes it back out of the free queue.
  EXPECT_EQ(p.free_queue(), (Ids{1, 2, 3, 0}));
  EXPECT_TRUE(p.is_cached(b));
  EXPECT_EQ(p.lookup(h, t), b);
  EXPECT_EQ(p.refcount(b), 1);
  EXPECT_EQ(p.free_queue(), (Ids{1, 2, 3}));

  EXPECT_EQ(p.lookup(h + 1, t), std::nullopt);
  const BlockPoolStats s = p.stats();
  EXPECT_EQ(s.lookups, 3);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.collisions, 0);
  EXPECT_EQ(s.evictions, 0);
}

TEST(BlockPool, SameHashDifferentTokensIsACollisionNotAHit) {
  BlockPool p(3, 2, kPoolFp, constant_hash);
  const Tokens t{1, 2}, other{1, 3};
  const int32_t b = *p.allocate();
  p.insert(b, p.chain_hash(0, t, 0), t);
  EXPECT_EQ(p.chain_hash(0, other, 0), p.chain_hash(0, t, 0));
  EXPECT_EQ(p.lookup(p.chain_hash(0, other, 0), other), std::nullopt);
  EXPECT_EQ(p.refcount(b), 1);
  EXPECT_EQ(p.stats().collisions, 1);
  EXPECT_EQ(p.stats().hits, 0);
  EXPECT_EQ(p.lookup(p.chain_hash(0, t, 0), t), b);
  EXPECT_EQ(p.stats().hits, 1);
  EXPECT_EQ(p.stats().lookups, 2);
}

TEST(BlockPool, InsertKeepsTheBlockAlreadyHoldingTheHash) {
  BlockPool p(3, 2, kPoolFp);
  const Tokens t{4, 4};
  const int32_t first = *p.allocate(), second = *p.allocate();
  const uint64_t h = p.chain_hash(0, t, 0);
  p.insert(first, h, t);
  p.insert(second, h, t);
  EXPECT_TRUE(p.is_cached(first));
  EXPECT_FALSE(p.is_cached(second));
  EXPECT_EQ(p.stats().n_cached, 1);
  EXPECT_EQ(p.lookup(h, t), first);
}

TEST(BlockPool, AllocateEvictsCachedBlocksInLruOrder) {
  BlockPool p(4, 1, kPoolFp);
  // Blocks 0..2 hold tokens 100..102, cached; block 3 is never used.
  Ids table;
  ASSERT_TRUE(p.allocate_n(3, table));
  std::vector<uint64_t> h;
  for (int32_t i = 0; i < 3; ++i) {
    const Tokens t{100 + i};
    h.push_back(p.chain_hash(0, t, 0));
    p.insert(table[size_t(i)], h.back(), t);
  }
  p.release(table);
  EXPECT_EQ(p.free_queue(), (Ids{3, 2, 1, 0}));
  EXPECT_EQ(p.stats().n_cached, 3);

  // The never-used block goes first, then the tail of the released table.
  EXPECT_EQ(p.allocate(), 3);
  EXPECT_EQ(p.stats().evictions, 0);
  EXPECT_EQ(p.allocate(), 2);
  EXPECT_FALSE(p.is_cached(2));
  EXPECT_EQ(p.stats().evictions, 1);
  EXPECT_EQ(p.stats().n_cached, 2);
  EXPECT_EQ(p.lookup(h[2], Tokens{102}), std::nullopt);  // evicted
  EXPECT_EQ(p.stats().collisions, 0);

  // A hit refreshes block 0: after it is freed again it is the most recently used.
  EXPECT_EQ(p.lookup(h[0], Tokens{100}), 0);
  p.unref(0);
  EXPECT_EQ(p.free_queue(), (Ids{1, 0}));
  EXPECT_EQ(p.allocate(), 1);
  EXPECT_EQ(p.stats().evictions, 2);
  EXPECT_EQ(p.lookup(h[0], Tokens{100}), 0);
  EXPECT_EQ(p.stats().n_cached, 1);
}

TEST(BlockPool, PeakUsedCountsHitsOnFreeBlocks) {
  BlockPool p(3, 1, kPoolFp);
  const int32_t b = *p.allocate();
  const Tokens t{1};
  p.insert(b, p.chain_hash(0, t, 0), t);
  p.unref(b);
  EXPECT_EQ(p.stats().peak_used, 1);
  ASSERT_TRUE(p.allocate().has_value());
  ASSERT_TRUE(p.allocate().has_value());
  EXPECT_EQ(p.lookup(p.chain_hash(0, t, 0), t), b);
  EXPECT_EQ(p.stats().peak_used, 3);
  EXPECT_EQ(p.stats().n_free, 0);
}

TEST(BlockPoolDeathTest, InvariantsStayCheckedInRelease) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool p(2, 2, kPoolFp);
  EXPECT_DEATH(p.unref(0), "invariant");
  EXPECT_DEATH(p.ref(2), "invariant");
  EXPECT_DEATH(p.ref(-1), "invariant");
  EXPECT_DEATH((void)p.refcount(5), "invariant");
  const int32_t b = *p.allocate();
  EXPECT_DEATH(p.insert(b, 1, Tokens{1}), "invariant");            // not a full block
  EXPECT_DEATH(p.insert(1, 1, Tokens{1, 2}), "invariant");         // not referenced
}

}  // namespace
}  // namespace agentkv
