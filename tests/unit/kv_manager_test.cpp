// KvManager and KvSequence with a hand-made tiny geometry (no model): budgets, prefix matching,
// chained hashes, copy on write, budget exhaustion and moves, with exact block ids and refcounts.
#include "kv/kv_manager.h"

#include "tiny_kv_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace agentkv {
namespace {

using Ids = std::vector<int32_t>;
using Tokens = std::vector<int32_t>;

constexpr uint64_t kFp = 77;

using testing_kv::constant_hash;
using testing_kv::iota_tokens;
using testing_kv::kBlock;
using testing_kv::make_manager;
using testing_kv::tiny_config;
constexpr int64_t kBlockBytes = testing_kv::kTinyBlockBytes4;

// Reserves and commits tokens as one forward step would.
void append(KvSequence& s, const Tokens& t) {
  ASSERT_TRUE(s.reserve(int64_t(t.size())));
  s.commit(t);
}

// A sequence that commits tokens and is released: its full blocks stay cached in the free queue.
Ids cache_and_release(KvManager& m, const Tokens& t) {
  KvSequence s(m);
  append(s, t);
  return s.blocks();
}


int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * int64_t(sysconf(_SC_PAGE_SIZE));
}

TEST(KvManager, BudgetIsAWholeNumberOfBlocks) {
  EXPECT_EQ(KvArena::bytes_per_block(tiny_config(), kBlock), kBlockBytes);
  KvManagerOptions opt;
  opt.block_size = kBlock;
  opt.mem_bytes = 10 * kBlockBytes + kBlockBytes - 1;
  auto m = KvManager::create(tiny_config(), kFp, opt);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ((*m)->pool().n_blocks(), 10);
  EXPECT_EQ((*m)->bytes_per_block(), kBlockBytes);
  EXPECT_EQ((*m)->budget_bytes(), 10 * kBlockBytes);
  EXPECT_EQ((*m)->used_bytes(), 0);
  EXPECT_EQ((*m)->block_size(), kBlock);
  EXPECT_EQ((*m)->pool().fingerprint(), kFp);
  EXPECT_EQ((*m)->arena().n_blocks(), 10);
  EXPECT_TRUE((*m)->arena().valid());
}

TEST(KvManager, CreateRejectsBudgetsBelowOneBlockAndBadBlockSizes) {
  KvManagerOptions opt;
  opt.block_size = kBlock;
  opt.mem_bytes = kBlockBytes - 1;
  auto m = KvManager::create(tiny_config(), kFp, opt);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find(std::to_string(kBlockBytes - 1)), std::string::npos) << m.error();
  EXPECT_NE(m.error().find(std::to_string(kBlockBytes)), std::string::npos) << m.error();
  EXPECT_EQ(m.error().find('\n'), std::string::npos);

  opt.mem_bytes = kBlockBytes;
  EXPECT_TRUE(KvManager::create(tiny_config(), kFp, opt).ok());
  opt.mem_bytes = -1;
  EXPECT_FALSE(KvManager::create(tiny_config(), kFp, opt).ok());

  opt.mem_bytes = 1 << 20;
  for (int bs : {0, -3, 1025}) {
    opt.block_size = bs;
    auto r = KvManager::create(tiny_config(), kFp, opt);
    ASSERT_FALSE(r.ok()) << bs;
    EXPECT_NE(r.error().find(std::to_string(bs)), std::string::npos) << r.error();
  }
  for (int bs : {1, 1024}) {
    opt.block_size = bs;
    EXPECT_TRUE(KvManager::create(tiny_config(), kFp, opt).ok()) << bs;
  }
  EXPECT_FALSE(KvManager::create(ModelConfig{}, kFp, KvManagerOptions{}).ok());
}

TEST(KvManager, ZeroBudgetMeansAQuarterOfRamMappedLazily) {
  // 2 MiB blocks, so the default budget is a few thousand blocks of pool bookkeeping.
  ModelConfig big = tiny_config();
  big.n_layer = 32;
  big.n_head_kv = 8;
  big.head_dim = 128;
  KvManagerOptions opt;
  const int64_t before = resident_bytes();
  auto m = KvManager::create(big, kFp, opt);
  ASSERT_TRUE(m.ok()) << m.error();
  const int64_t want = default_kv_mem_bytes();
  EXPECT_GT(want, 0);
  EXPECT_LE((*m)->budget_bytes(), want);
  EXPECT_GT((*m)->budget_bytes(), want - (*m)->bytes_per_block());
  // Nothing is touched until a block is written.
  EXPECT_LT(resident_bytes() - before, int64_t(64) << 20);
  const PagedKvLayer l = (*m)->arena().layer(31);
  const int32_t last = int32_t((*m)->pool().n_blocks() - 1);
  EXPECT_EQ(*l.v(last, 15), 0);
  *l.v(last, 15) = 7;
  EXPECT_EQ(*l.v(last, 15), 7);
}

TEST(KvManager, ParseByteSize) {
  const std::pair<const char*, int64_t> ok[] = {
      {"0", 0},
      {"1073741824", 1073741824},
      {"64k", 64 << 10},
      {"64K", 64 << 10},
      {"512M", int64_t(512) << 20},
      {"4G", int64_t(4) << 30},
      {"4GB", int64_t(4) << 30},
      {"4GiB", int64_t(4) << 30},
      {"4g", int64_t(4) << 30},
      {"1.5GiB", int64_t(3) << 29},
      {"0.5k", 512},
      {"2T", int64_t(2) << 40},
      {"100B", 100},
      {"1.5", 1},
      {"9223372036854775807", INT64_MAX},
      {"8388607T", int64_t(8388607) << 40},
  };
  for (const auto& [text, want] : ok) {
    auto r = parse_byte_size(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error();
    EXPECT_EQ(*r, want) << text;
  }
  const char* bad[] = {"",    "-1",  "-4G",  "abc", "4X",  "4 G",  " 4G", "4G ", "4GiBx", "4iB", "4Gb",
                       "1.",  ".5",  "1.2.3", "G",  "4KK", "+4",   "0x10", "9223372036854775808",
                       "8388608T", "99999999999999999999", "1e9"};
  for (const char* text : bad) {
    auto r = parse_byte_size(text);
    ASSERT_FALSE(r.ok()) << text << " parsed as " << *r;
    std::string quoted = "'";  // built by appends: GCC 12 warns (-Wrestrict) on "'" + text + "'"
    quoted.append(text).push_back('\'');
    EXPECT_NE(r.error().find(quoted), std::string::npos) << r.error();
  }
}

TEST(KvSequence, ReserveAndCommitFillBlocksInOrder) {
  auto m = make_manager(8);
  BlockPool& p = m->pool();
  KvSequence s(*m);
  EXPECT_EQ(s.blocks_needed(0), 0);
  EXPECT_EQ(s.blocks_needed(1), 1);
  EXPECT_EQ(s.blocks_needed(5), 2);
  ASSERT_TRUE(s.reserve(6));
  EXPECT_EQ(s.blocks(), (Ids{0, 1}));
  EXPECT_EQ(s.n_tokens(), 0);
  const Tokens t = iota_tokens(6);
  s.commit(t);
  EXPECT_EQ(s.tokens(), t);
  EXPECT_TRUE(p.is_cached(0));   // full
  EXPECT_FALSE(p.is_cached(1));  // 2 of 4 slots
  // Capacity left in block 1: two more tokens need nothing, a third needs one block.
  EXPECT_EQ(s.blocks_needed(2), 0);
  EXPECT_EQ(s.blocks_needed(3), 1);
  EXPECT_EQ(m->used_bytes(), 2 * kBlockBytes);

  // Reserving ahead of commits: capacity 12 while 6 are committed, then commit in two steps.
  ASSERT_TRUE(s.reserve(6));
  EXPECT_EQ(s.blocks(), (Ids{0, 1, 2}));
  EXPECT_EQ(s.blocks_needed(6), 0);
  EXPECT_EQ(s.blocks_needed(7), 1);
  s.commit(iota_tokens(3, 200));
  EXPECT_TRUE(p.is_cached(1));
  EXPECT_EQ(s.blocks_needed(3), 0);
  s.commit(iota_tokens(3, 300));
  EXPECT_TRUE(p.is_cached(2));
  EXPECT_EQ(s.n_tokens(), 12);
  EXPECT_EQ(p.stats().n_cached, 3);
  EXPECT_EQ(p.stats().n_used, 3);
}

TEST(KvSequence, CommittedBlocksAreIndexedUnderChainedHashes) {
  auto m = make_manager(8);
  BlockPool& p = m->pool();
  const uint64_t salt = 5;
  KvSequence s(*m, salt);
  const Tokens t = iota_tokens(8);
  append(s, t);
  const std::span<const int32_t> b0(t.data(), 4), b1(t.data() + 4, 4);
  const uint64_t h0 = p.chain_hash(0, b0, salt);
  const uint64_t h1 = p.chain_hash(h0, b1, salt);
  EXPECT_EQ(h0, hash_block_tokens(0, b0, kFp, salt));
  // Same tokens under another parent or salt are another block.
  EXPECT_EQ(p.lookup(p.chain_hash(0, b1, salt), b1), std::nullopt);
  EXPECT_EQ(p.lookup(p.chain_hash(h0, b1, salt + 1), b1), std::nullopt);
  EXPECT_EQ(p.lookup(h1, b1), 1);
  EXPECT_EQ(p.lookup(h0, b0), 0);
  EXPECT_EQ(p.refcount(0), 2);
  EXPECT_EQ(p.refcount(1), 2);
  p.unref(0);
  p.unref(1);
  EXPECT_EQ(p.stats().collisions, 0);
}

TEST(KvSequence, MatchPrefixReusesFullBlocksAndLeavesATokenToCompute) {
  auto m = make_manager(10);
  BlockPool& p = m->pool();
  const Tokens prompt = iota_tokens(9);
  {
    KvSequence a(*m);
    EXPECT_EQ(a.match_prefix(prompt), 0);  // nothing cached yet
  }
  EXPECT_EQ(cache_and_release(*m, prompt), (Ids{0, 1, 2}));  // released tail first
  EXPECT_EQ(p.free_queue(), (Ids{3, 4, 5, 6, 7, 8, 9, 2, 1, 0}));
  EXPECT_EQ(p.stats().n_cached, 2);

  KvSequence b(*m);
  EXPECT_EQ(b.match_prefix(prompt), 8);
  EXPECT_EQ(b.blocks(), (Ids{0, 1}));
  EXPECT_EQ(b.tokens(), Tokens(prompt.begin(), prompt.begin() + 8));
  EXPECT_EQ(p.refcount(0), 1);
  EXPECT_EQ(p.free_queue(), (Ids{3, 4, 5, 6, 7, 8, 9, 2}));
  // The next token goes into a new block; block 1 is full, so nothing is copied.
  EXPECT_EQ(b.blocks_needed(1), 1);
  append(b, Tokens{prompt[8]});
  EXPECT_EQ(b.blocks(), (Ids{0, 1, 3}));

  // A prompt of exactly two blocks reuses only one: its last token must be computed.
  KvSequence c(*m);
  EXPECT_EQ(c.match_prefix(Tokens(prompt.begin(), prompt.begin() + 8)), 4);
  EXPECT_EQ(c.blocks(), (Ids{0}));
  EXPECT_EQ(p.refcount(0), 2);

  // Stops at the first miss: a different second block reuses the first only; a different first
  // block reuses nothing even though the second block's tokens match (the chain differs).
  Tokens second = prompt;
  second[5] = -1;
  KvSequence d(*m);
  EXPECT_EQ(d.match_prefix(second), 4);
  Tokens first = prompt;
  first[0] = -1;
  KvSequence e(*m);
  EXPECT_EQ(e.match_prefix(first), 0);
  EXPECT_TRUE(e.blocks().empty());
  // Another salt shares nothing.
  KvSequence f(*m, 1);
  EXPECT_EQ(f.match_prefix(prompt), 0);
  KvSequence g(*m);
  EXPECT_EQ(g.match_prefix(Tokens{}), 0);
  EXPECT_EQ(g.match_prefix(Tokens{prompt[0]}), 0);
  EXPECT_EQ(p.stats().collisions, 0);
}

TEST(KvSequence, MatchPrefixMissesAfterEvictionInLruOrder) {
  auto m = make_manager(4);
  BlockPool& p = m->pool();
  const Tokens prompt = iota_tokens(13);
  EXPECT_EQ(cache_and_release(*m, Tokens(prompt.begin(), prompt.begin() + 12)), (Ids{0, 1, 2}));
  EXPECT_EQ(p.free_queue(), (Ids{3, 2, 1, 0}));
  // Two new blocks: the never-used one, then the last block of the released sequence.
  KvSequence other(*m);
  append(other, iota_tokens(8, 500));
  EXPECT_EQ(other.blocks(), (Ids{3, 2}));
  EXPECT_EQ(p.stats().evictions, 1);
  EXPECT_TRUE(p.is_cached(1));
  EXPECT_EQ(p.stats().n_cached, 4);  // 0 and 1 from before, 3 and 2 with new contents

  KvSequence b(*m);
  EXPECT_EQ(b.match_prefix(prompt), 8);
  EXPECT_EQ(b.blocks(), (Ids{0, 1}));
}

TEST(KvSequence, PrefixCachingOffIndexesAndMatchesNothing) {
  auto m = make_manager(6, /*prefix_caching=*/false);
  const Tokens prompt = iota_tokens(9);
  cache_and_release(*m, prompt);
  EXPECT_EQ(m->pool().stats().n_cached, 0);
  KvSequence b(*m);
  EXPECT_EQ(b.match_prefix(prompt), 0);
  EXPECT_EQ(m->pool().stats().lookups, 0);
}

TEST(KvSequence, HashCollisionIsNotReused) {
  auto m = make_manager(6, true, constant_hash);
  BlockPool& p = m->pool();
  KvSequence a(*m);
  append(a, iota_tokens(8));
  // Both blocks hash to 42: the first holds the index entry, the second stays uncached.
  EXPECT_TRUE(p.is_cached(0));
  EXPECT_FALSE(p.is_cached(1));

  KvSequence b(*m);
  EXPECT_EQ(b.match_prefix(iota_tokens(9, 900)), 0);
  EXPECT_TRUE(b.blocks().empty());
  EXPECT_EQ(p.stats().collisions, 1);
  EXPECT_EQ(p.stats().hits, 0);
  EXPECT_EQ(p.refcount(0), 1);

  KvSequence c(*m);
  EXPECT_EQ(c.match_prefix(iota_tokens(9)), 4);  // block 0 verifies; block 1's lookup finds block 0's tokens
  EXPECT_EQ(c.blocks(), (Ids{0}));
  EXPECT_EQ(p.stats().collisions, 2);
  EXPECT_EQ(p.stats().hits, 1);
}

TEST(KvSequence, ForkSharesBlocksAndWriterCopiesThePartialBlock) {
  auto m = make_manager(6);
  BlockPool& p = m->pool();
  KvSequence parent(*m, 3);
  append(parent, iota_tokens(6));
  ASSERT_EQ(parent.blocks(), (Ids{0, 1}));

  // Distinct values in every K and V slot of every layer of block 1.
  const KvArena& arena = m->arena();
  for (int l = 0; l < arena.n_layer(); ++l)
    for (int slot = 0; slot < kBlock; ++slot)
      for (int d = 0; d < arena.kv_dim(); ++d) {
        arena.layer(l).k(1, slot)[d] = kv_t(1000 + l * 100 + slot * 10 + d);
        arena.layer(l).v(1, slot)[d] = kv_t(5000 + l * 100 + slot * 10 + d);
      }

  KvSequence child = parent.fork();
  EXPECT_EQ(child.blocks(), (Ids{0, 1}));
  EXPECT_EQ(child.tokens(), parent.tokens());
  EXPECT_EQ(child.salt(), 3u);
  EXPECT_EQ(p.refcount(0), 2);
  EXPECT_EQ(p.refcount(1), 2);

  // Block 1 is partial and shared: writing one more token copies it first.
  EXPECT_EQ(child.blocks_needed(0), 0);
  EXPECT_EQ(child.blocks_needed(1), 1);
  EXPECT_EQ(child.blocks_needed(3), 2);
  ASSERT_TRUE(child.reserve(1));
  EXPECT_EQ(child.blocks(), (Ids{0, 2}));
  EXPECT_EQ(p.refcount(0), 2);
  EXPECT_EQ(p.refcount(1), 1);
  EXPECT_EQ(p.refcount(2), 1);
  EXPECT_EQ(std::memcmp(arena.block_data(1), arena.block_data(2), size_t(kBlockBytes)), 0);
  EXPECT_EQ(arena.layer(1).v(2, 3)[3], kv_t(5000 + 100 + 30 + 3));

  // The parent now owns block 1 alone: no copy for it.
  EXPECT_EQ(parent.blocks_needed(1), 0);
  ASSERT_TRUE(parent.reserve(1));
  EXPECT_EQ(parent.blocks(), (Ids{0, 1}));

  child.commit(Tokens{7});
  parent.commit(Tokens{8});
  EXPECT_EQ(child.tokens().back(), 7);
  EXPECT_EQ(parent.tokens().back(), 8);

  // Full shared blocks are never copied.
  KvSequence grandchild = child.fork();
  EXPECT_EQ(p.refcount(0), 3);
  append(grandchild, iota_tokens(2, 40));  // fills block 2's copy, starts a new block
  EXPECT_EQ(grandchild.blocks(), (Ids{0, 3, 4}));
  EXPECT_EQ(p.refcount(2), 1);

  grandchild.release();
  child.release();
  EXPECT_EQ(p.refcount(0), 1);
  parent.release();
  EXPECT_EQ(p.stats().n_used, 0);
}

TEST(KvSequence, ForkAfterReservingAheadCopiesEverySharedBlockItWrites) {
  auto m = make_manager(8);
  BlockPool& p = m->pool();
  KvSequence parent(*m);
  ASSERT_TRUE(parent.reserve(10));
  parent.commit(iota_tokens(5));
  ASSERT_EQ(parent.blocks(), (Ids{0, 1, 2}));
  KvSequence child = parent.fork();
  // Slots 5, 6 are in shared block 1; slots 5..9 also in shared (empty) block 2.
  EXPECT_EQ(child.blocks_needed(2), 1);
  EXPECT_EQ(child.blocks_needed(5), 2);
  EXPECT_EQ(child.blocks_needed(8), 3);
  ASSERT_TRUE(child.reserve(5));
  EXPECT_EQ(child.blocks(), (Ids{0, 3, 4}));
  EXPECT_EQ(p.refcount(1), 1);
  EXPECT_EQ(p.refcount(2), 1);
  EXPECT_EQ(p.refcount(0), 2);
  child.commit(iota_tokens(5, 50));
  parent.commit(iota_tokens(7, 70));
  EXPECT_EQ(p.stats().n_used, 5);
}

TEST(KvSequence, TruncateGivesBackTailBlocksAndNeverWritesIntoAnIndexedBlock) {
  auto m = make_manager(16);
  KvSequence s(*m);
  append(s, iota_tokens(10));  // blocks: [4 full][4 full][2 partial]
  const Ids blocks = s.blocks();
  ASSERT_EQ(blocks.size(), 3u);
  KvSequence f = s.fork();
  // Inside the unfinished last block: kept, shared, so the next write copies it.
  EXPECT_EQ(f.truncate(9), 9);
  EXPECT_EQ(f.blocks(), blocks);
  EXPECT_EQ(f.blocks_needed(1), 1);
  // Inside a full (indexed) block: kept, and the next write copies it first.
  EXPECT_EQ(f.truncate(6), 6);
  EXPECT_EQ(f.blocks(), Ids(blocks.begin(), blocks.begin() + 2));
  EXPECT_EQ(f.tokens(), iota_tokens(6));
  EXPECT_EQ(m->pool().refcount(blocks[2]), 1);
  EXPECT_EQ(f.blocks_needed(1), 1);
  // Appending different tokens after the cut writes a copy, never the indexed block.
  append(f, Tokens{7, 7, 7});
  EXPECT_NE(f.blocks()[1], blocks[1]);
  EXPECT_EQ(m->pool().refcount(blocks[1]), 1);
  EXPECT_TRUE(m->pool().is_cached(blocks[1]));
  // The same when the sequence alone holds the indexed block (its original released).
  s.release();
  KvSequence g(*m);
  EXPECT_EQ(g.match_prefix(iota_tokens(10)), 8);
  EXPECT_EQ(g.truncate(5), 5);
  const int32_t cached = g.blocks()[1];
  append(g, Tokens{9, 9});
  EXPECT_NE(g.blocks()[1], cached);
  KvSequence h(*m);
  EXPECT_EQ(h.match_prefix(iota_tokens(10)), 8) << "the cached block still holds its tokens";
  h.release();
  g.release();
  EXPECT_EQ(f.truncate(0), 0);
  EXPECT_TRUE(f.blocks().empty());
  EXPECT_EQ(m->pool().stats().n_used, 0);
}

TEST(KvSequence, ApproximateKvIsNeverIndexedNorItsForksOrDescendants) {
  auto m = make_manager(16);
  KvSequence s(*m);
  append(s, iota_tokens(4));
  s.mark_approximate_from(6);  // slots 6.. hold reused-and-blended K/V
  append(s, iota_tokens(8, 104));
  // Block 0 (slots 0-3) is exact and indexed; block 1 (4-7) holds slot 6, block 2 is after it.
  KvSequence probe(*m);
  EXPECT_EQ(probe.match_prefix(iota_tokens(13)), 4);
  probe.release();
  KvSequence f = s.fork();
  EXPECT_TRUE(f.approximate());
  append(f, iota_tokens(4, 112));
  EXPECT_EQ(probe.match_prefix(iota_tokens(17)), 4) << "K/V computed on approximate K/V is approximate";
  probe.release();
  f.release();
  EXPECT_FALSE(f.approximate());
}

TEST(KvSequence, CopyPrefixToAnotherManagerCopiesTheKvAndKeepsTheSourceAsItWas) {
  auto m = make_manager(8), other = make_manager(4, false), small = make_manager(1, false);
  KvSequence s(*m);
  append(s, iota_tokens(10));
  // Every value of the source's blocks written with its own byte, so a copy of another block shows.
  for (size_t i = 0; i < s.blocks().size(); ++i)
    std::memset(m->arena().block_data(s.blocks()[i]), int(0x10 + i), size_t(kBlockBytes));
  s.mark_approximate_from(5);
  const Ids source_blocks = s.blocks();
  auto c = s.copy_prefix_to(*other, 6);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->tokens(), iota_tokens(6));
  EXPECT_EQ(c->blocks(), (Ids{0, 1}));
  EXPECT_EQ(c->approximate_from(), 5);
  for (size_t i = 0; i < c->blocks().size(); ++i)
    EXPECT_EQ(std::memcmp(other->arena().block_data(c->blocks()[i]), m->arena().block_data(source_blocks[i]),
                          size_t(kBlockBytes)),
              0)
        << "block " << i;
  EXPECT_EQ(s.blocks(), source_blocks);
  EXPECT_EQ(s.n_tokens(), 10);
  EXPECT_EQ(m->pool().refcount(source_blocks[0]), 1) << "nothing of the source is shared with the copy";
  // Too little room in the target, or another geometry: refused with their codes, nothing taken.
  auto none = s.copy_prefix_to(*small, 6);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(small->pool().stats().n_used, 0);
  KvManagerOptions opt;
  opt.block_size = 2 * kBlock;
  opt.mem_bytes = 4 * kBlockBytes;
  auto wide = KvManager::create(tiny_config(), kFp, opt);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(s.copy_prefix_to(**wide, 6).code(), ErrorCode::kInvalidArgument);
}

TEST(KvSequence, ReserveFailsWithoutChangingAnythingWhenThePoolIsShort) {
  auto m = make_manager(3);
  BlockPool& p = m->pool();
  KvSequence a(*m);
  append(a, iota_tokens(10));
  ASSERT_EQ(a.blocks(), (Ids{0, 1, 2}));
  EXPECT_EQ(p.allocate(), std::nullopt);

  KvSequence b(*m);
  EXPECT_EQ(b.blocks_needed(1), 1);
  EXPECT_FALSE(b.reserve(1));
  EXPECT_TRUE(b.blocks().empty());
  EXPECT_TRUE(a.reserve(2));  // fits in block 2
  EXPECT_FALSE(a.reserve(3));
  EXPECT_EQ(a.blocks(), (Ids{0, 1, 2}));

  // Copy on write needs a block too: the fork stays shared and unchanged.
  KvSequence c = a.fork();
  EXPECT_FALSE(c.reserve(1));
  EXPECT_EQ(c.blocks(), (Ids{0, 1, 2}));
  EXPECT_EQ(p.refcount(2), 2);
  EXPECT_EQ(p.stats().n_used, 3);
  EXPECT_EQ(p.stats().peak_used, 3);

  a.release();
  c.release();
  EXPECT_EQ(p.free_queue(), (Ids{2, 1, 0}));
  EXPECT_TRUE(b.reserve(4));
  EXPECT_EQ(b.blocks(), (Ids{2}));
  EXPECT_EQ(p.stats().evictions, 0);  // block 2 was partial, never cached
}

TEST(KvSequence, MovesLeaveTheSourceEmptyAndReleaseOnce) {
  auto m = make_manager(6);
  BlockPool& p = m->pool();
  KvSequence a(*m);
  append(a, iota_tokens(6));
  KvSequence b(std::move(a));
  EXPECT_TRUE(a.blocks().empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(a.n_tokens(), 0);
  EXPECT_EQ(b.blocks(), (Ids{0, 1}));
  EXPECT_EQ(p.refcount(0), 1);

  KvSequence c(*m);
  append(c, iota_tokens(2, 900));
  EXPECT_EQ(c.blocks(), (Ids{2}));
  c = std::move(b);  // releases block 2
  EXPECT_EQ(p.refcount(2), 0);
  EXPECT_TRUE(b.blocks().empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.blocks(), (Ids{0, 1}));
  EXPECT_EQ(c.n_tokens(), 6);

  std::vector<KvSequence> v;
  v.push_back(std::move(c));
  v.push_back(v[0].fork());
  v.reserve(16);  // moves both
  EXPECT_EQ(p.refcount(0), 2);
  v.clear();
  EXPECT_EQ(p.stats().n_used, 0);
  EXPECT_EQ(p.free_queue().size(), 6u);
}

TEST(KvSequenceDeathTest, MisuseIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto m = make_manager(4);
  KvSequence a(*m);
  EXPECT_DEATH(a.commit(Tokens{1}), "invariant");  // nothing reserved
  append(a, iota_tokens(2));
  EXPECT_DEATH((void)a.match_prefix(iota_tokens(9)), "invariant");  // not empty
  ASSERT_TRUE(a.reserve(1));
  KvSequence b = a.fork();
  EXPECT_DEATH(a.commit(Tokens{3}), "invariant");  // would write a block shared since reserve
}

}  // namespace
}  // namespace agentkv
