// Master–diff storage's pure logic with a hand-made tiny geometry (no model): which blocks a blended
// run's compact form drops, a KvSequence with holes (KvSequence::drop_blocks / fill_holes: exact
// refcounts, nothing leaked), and the segment store holding a compact context: segments in holes are
// not indexed, hits never reach into a hole, and every block the detached part holds is counted and
// given back on eviction.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/compact_context.h"
#include "engine/engine.h"
#include "kv/segment_store.h"
#include "tiny_kv_config.h"

namespace agentkv {
namespace {
namespace compact_storage {

using Tokens = std::vector<int32_t>;
using testing_kv::make_manager;
using Segments = std::vector<std::pair<int64_t, int64_t>>;
using BlockSpan = std::pair<int64_t, int64_t>;

std::shared_ptr<KvSequence> filled(KvManager& m, const Tokens& t) {
  auto s = std::make_shared<KvSequence>(m);
  EXPECT_TRUE(s->reserve(int64_t(t.size())));
  s->commit(t);
  return s;
}

Tokens iota_tokens(int n, int32_t first) {
  Tokens t(size_t(n), 0);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(DroppableBlocks, OnlyBlocksWhollyInsideTheRun) {
  EXPECT_EQ(droppable_blocks(0, 8, 4), (BlockSpan{0, 2}));
  EXPECT_EQ(droppable_blocks(2, 8, 4), (BlockSpan{1, 2}));   // slots 2..9: block 1 only
  EXPECT_EQ(droppable_blocks(3, 4, 4), (BlockSpan{1, 1}));   // straddles two blocks
  EXPECT_EQ(droppable_blocks(5, 2, 4), (BlockSpan{2, 2}));   // inside one block
  EXPECT_EQ(droppable_blocks(4, 12, 4), (BlockSpan{1, 4}));
}

// Echoes: runs of a context's own text that a master also holds, found greedily, longest first, only
// inside [from, to) and only when at least min_tokens long.
TEST(FindEchoes, FindsTheLongestRunsAMasterQuotesAndNothingShorter) {
  auto m = make_manager(64);
  // Context: [persona 100..119][answer 500..523][instruction 200..209][again 500..505].
  Tokens ctx_t = iota_tokens(20, 100);
  const Tokens answer = iota_tokens(24, 500);
  ctx_t.insert(ctx_t.end(), answer.begin(), answer.end());
  const Tokens instr = iota_tokens(10, 200);
  ctx_t.insert(ctx_t.end(), instr.begin(), instr.end());
  ctx_t.insert(ctx_t.end(), answer.begin(), answer.begin() + 6);
  auto ctx = filled(*m, ctx_t);
  // Master: [BOS 1][others 300..339][the answer][others 400..409][a 7-token piece of the persona].
  Tokens mt{1};
  const Tokens others = iota_tokens(40, 300);
  mt.insert(mt.end(), others.begin(), others.end());
  mt.insert(mt.end(), answer.begin(), answer.end());
  const Tokens more = iota_tokens(10, 400);
  mt.insert(mt.end(), more.begin(), more.end());
  mt.insert(mt.end(), ctx_t.begin() + 3, ctx_t.begin() + 10);
  auto master = filled(*m, mt);

  auto e = find_echoes(*ctx, 0, ctx->n_tokens(), master, 1, 8, 0.25);
  ASSERT_EQ(e.size(), 1u);  // the persona piece (7) and the repeated start (6) are too short
  EXPECT_EQ(e[0].begin, 20);
  EXPECT_EQ(e[0].n, 24);
  EXPECT_EQ(e[0].master_start, 41);
  EXPECT_EQ(e[0].master, master);
  EXPECT_DOUBLE_EQ(e[0].keep, 0.25);
  // At 6 tokens the persona piece and the repeated answer start count too.
  e = find_echoes(*ctx, 0, ctx->n_tokens(), master, 1, 6, 1);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ((std::pair{e[0].begin, e[0].n}), (std::pair<int64_t, int64_t>{3, 7}));
  EXPECT_EQ(e[0].master_start, 75);
  EXPECT_EQ((std::pair{e[1].begin, e[1].n}), (std::pair<int64_t, int64_t>{20, 24}));
  EXPECT_EQ((std::pair{e[2].begin, e[2].n}), (std::pair<int64_t, int64_t>{54, 6}));
  EXPECT_EQ(e[2].master_start, 41);
  // Bounded by [from, to): a run is cut at `to`, and nothing before `from` is looked at.
  e = find_echoes(*ctx, 25, 40, master, 1, 8, 1);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ((std::pair{e[0].begin, e[0].n}), (std::pair<int64_t, int64_t>{25, 15}));
  EXPECT_EQ(e[0].master_start, 46);
  // Only the master's slots from master_start on: the answer at 41.. is outside a search from 70.
  EXPECT_TRUE(find_echoes(*ctx, 0, ctx->n_tokens(), master, 70, 8, 1).empty());
  // Nothing to find: no master, an empty or short range, a bad min_tokens.
  EXPECT_TRUE(find_echoes(*ctx, 0, ctx->n_tokens(), nullptr, 1, 8, 1).empty());
  EXPECT_TRUE(find_echoes(*ctx, 30, 30, master, 1, 8, 1).empty());
  EXPECT_TRUE(find_echoes(*ctx, 0, ctx->n_tokens(), master, 1, 0, 1).empty());
}

TEST(FindEchoes, ParseEchoKeepTakesOffOrAShareAndNamesBadText) {
  auto off = parse_echo_keep("off");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  for (const char* ok : {"0", "1", "0.25", "1e-2"}) {
    auto v = parse_echo_keep(ok);
    ASSERT_TRUE(v.ok()) << ok;
    EXPECT_DOUBLE_EQ(v->value(), std::strtod(ok, nullptr));
  }
  for (const char* bad : {"", "2", "-0.1", "half", "0.5x", "nan", "Off"}) {
    auto v = parse_echo_keep(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.error().find(std::string("'") + bad + "'"), std::string::npos) << v.error();
    EXPECT_NE(v.error().find("off or a share in [0, 1]"), std::string::npos) << v.error();
  }
}

TEST(MasterContext, ParseTakesBlockOrAgentAndNamesBadText) {
  for (MasterContext c : {MasterContext::kBlock, MasterContext::kAgent}) {
    auto v = parse_master_context(master_context_name(c));
    ASSERT_TRUE(v.ok()) << master_context_name(c);
    EXPECT_EQ(*v, c);
  }
  for (const char* bad : {"", "Agent", "blocks", "agent ", "off"}) {
    auto v = parse_master_context(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.error().find(std::string("'") + bad + "'"), std::string::npos) << v.error();
    EXPECT_NE(v.error().find("choose block or agent"), std::string::npos) << v.error();
  }
}

TEST(KvSequenceHoles, DropForkFillAndReleaseKeepRefcountsExact) {
  auto m = make_manager(16);
  const int64_t free0 = m->pool().num_free();
  KvSequence s(*m);
  ASSERT_TRUE(s.reserve(14));
  s.commit(iota_tokens(14, 10));  // 4 blocks, the last partial
  s.mark_approximate_from(0);     // not in the prefix index: freed blocks really come back
  const std::vector<int32_t> blocks = s.blocks();
  s.drop_blocks(1, 3);
  EXPECT_EQ(s.n_holes(), 2);
  EXPECT_EQ(m->pool().num_free(), free0 - 2);
  EXPECT_EQ(s.blocks()[1], KvSequence::kHole);
  EXPECT_TRUE(s.has_kv(0, 4));
  EXPECT_FALSE(s.has_kv(3, 5));
  EXPECT_TRUE(s.has_kv(12, 14));
  EXPECT_FALSE(s.has_kv(12, 15));  // past the end
  EXPECT_EQ(s.n_tokens(), 14);     // the tokens stay
  {
    KvSequence f = s.fork();  // holes stay holes; the kept blocks are shared
    EXPECT_EQ(m->pool().refcount(blocks[0]), 2);
    EXPECT_EQ(f.n_holes(), 2);
    ASSERT_TRUE(f.fill_holes());
    EXPECT_EQ(f.n_holes(), 0);
    EXPECT_EQ(m->pool().num_free(), free0 - 4);
    ASSERT_TRUE(f.reserve(2));  // writing now works: the shared partial last block is copied
    EXPECT_EQ(m->pool().num_free(), free0 - 5);
  }
  EXPECT_EQ(m->pool().num_free(), free0 - 2);
  s.truncate(6);  // drops the tail block; the hole at 1 stays
  EXPECT_EQ(m->pool().num_free(), free0 - 1);
  s.release();
  EXPECT_EQ(m->pool().num_free(), free0);
}

TEST(KvSequenceHoles, FillHolesChangesNothingWhenThePoolIsShort) {
  auto m = make_manager(4);
  KvSequence s(*m);
  ASSERT_TRUE(s.reserve(16));
  s.commit(iota_tokens(16, 1));
  s.drop_blocks(0, 3);
  KvSequence big(*m);
  ASSERT_TRUE(big.reserve(8));  // 2 of the 3 free blocks
  EXPECT_FALSE(s.fill_holes());
  EXPECT_EQ(s.n_holes(), 3);
}

// What a compact context holds besides its sequence, in the store's eyes: blocks of its own.
class FakeDetached : public SegmentStore::Detached {
 public:
  FakeDetached(KvManager& m, int64_t n) : m_(m) { EXPECT_TRUE(m.pool().allocate_n(n, blocks_)); }
  ~FakeDetached() override { m_.pool().release(blocks_); }
  void add_block_refs(std::vector<int32_t>& out) const override {
    out.insert(out.end(), blocks_.begin(), blocks_.end());
  }
  int64_t diff_blocks() const override { return int64_t(blocks_.size()); }

 private:
  KvManager& m_;
  std::vector<int32_t> blocks_;
};

TEST(SegmentStore, CompactContextServesOnlyTheSegmentsItHoldsAndCountsItsDetachedBlocks) {
  auto m = make_manager(32);
  const int64_t free0 = m->pool().num_free();
  SegmentStore store;
  // [header 0..2][segment A 2..6][segment B 6..14][segment C 14..18]: B's block 2 is wholly blended.
  const Tokens a = iota_tokens(4, 100), b = iota_tokens(8, 200), c = iota_tokens(4, 300);
  Tokens t{1, 2};
  for (const Tokens* p : {&a, &b, &c}) t.insert(t.end(), p->begin(), p->end());
  auto dense = filled(*m, t);
  dense->mark_approximate_from(6);
  auto kept = std::make_shared<KvSequence>(dense->fork());
  dense.reset();
  kept->drop_blocks(2, 3);  // slots 8..11, inside B
  auto detached = std::make_shared<FakeDetached>(*m, 1);
  std::vector<int32_t> refs(size_t(m->pool().n_blocks()), 0);
  store.add(kept, Segments{{2, 6}, {6, 14}, {14, 18}}, detached, Segments{{8, 12}});
  EXPECT_EQ(store.n_compact(), 1u);
  EXPECT_EQ(store.n_diff_blocks(), 1);
  EXPECT_EQ(store.n_blocks(), 5);  // 4 kept + 1 detached
  store.add_block_refs(refs);
  EXPECT_EQ(refs[size_t(kept->blocks()[0])], 1);
  EXPECT_EQ(std::accumulate(refs.begin(), refs.end(), 0), 5);
  EXPECT_EQ(store.find(a).size(), 1u);
  EXPECT_TRUE(store.find(b).empty());  // in a hole: its own master serves it
  ASSERT_EQ(store.find(c).size(), 1u);
  EXPECT_EQ(store.find(c)[0].slot, 14);
  // A prefix hit on it says it must be expanded.
  Tokens next = t;
  next.push_back(7);
  SegmentStore::PrefixHit ph = store.longest_prefix(next, 0);
  EXPECT_EQ(ph.tokens, int64_t(t.size()));
  EXPECT_EQ(ph.detached, detached);
  EXPECT_EQ(ph.blended, (Segments{{8, 12}}));
  kept.reset();
  detached.reset();
  EXPECT_EQ(m->pool().num_free(), free0 - 5);
  store.clear();
  EXPECT_EQ(store.n_blocks(), 0);
  EXPECT_EQ(store.n_compact(), 0u);
  EXPECT_EQ(m->pool().num_free(), free0 - 5) << "a prefix hit still holds the context";
  ph = {};
  EXPECT_EQ(m->pool().num_free(), free0);
}

TEST(SegmentStore, BlendedBlocksServeNoMasterInADenseContextEither) {
  auto m = make_manager(32);
  SegmentStore store;
  const Tokens a = iota_tokens(4, 100), b = iota_tokens(8, 200), c = iota_tokens(4, 300);
  Tokens t{1, 2};
  for (const Tokens* p : {&a, &b, &c}) t.insert(t.end(), p->begin(), p->end());
  store.add(filled(*m, t), Segments{{2, 6}, {6, 14}, {14, 18}}, nullptr, Segments{{8, 12}});
  EXPECT_EQ(store.n_compact(), 0u);
  EXPECT_TRUE(store.find(b).empty());
  const auto hits = store.find(c);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_TRUE(hits[0].serves(12, 18));  // a run may reach back to the block after the blended ones
  EXPECT_FALSE(hits[0].serves(11, 18));
  EXPECT_EQ(store.longest_prefix(t, 0).blended, (Segments{{8, 12}}));
}

}  // namespace compact_storage
}  // namespace
}  // namespace agentkv
