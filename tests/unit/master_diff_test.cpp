// Master–diff storage with a tiny hand-made geometry (no model): diffs pack exactly the rows asked
// for, and masters are freed exactly when their last diff goes, whatever the order.
#include "share/master_diff.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tiny_kv_config.h"

namespace agentkv {
namespace {

constexpr int kMasterBlock = testing_kv::kBlock;

std::unique_ptr<KvManager> make_master_manager(int64_t n_blocks) { return testing_kv::make_two_head_manager(n_blocks); }

// A master of 9 tokens at slots [1, 10) of a 3-block sequence, each K/V row filled with its slot.
std::shared_ptr<const MasterSegment> make_master(KvManager& m) {
  KvSequence s(m);
  std::vector<int32_t> toks = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_TRUE(s.reserve(int64_t(toks.size())));
  std::vector<float> row(size_t(m.arena().kv_dim()));
  for (int slot = 0; slot < 10; ++slot)
    for (int l = 0; l < m.arena().n_layer(); ++l) {
      std::fill(row.begin(), row.end(), float(slot * 10 + l));
      kv_store(m.arena().layer(l).k(s.blocks()[size_t(slot / kMasterBlock)], slot % kMasterBlock), row.data(), int(row.size()));
      kv_store(m.arena().layer(l).v(s.blocks()[size_t(slot / kMasterBlock)], slot % kMasterBlock), row.data(), int(row.size()));
    }
  s.commit(toks);
  return std::make_shared<const MasterSegment>(std::move(s), 1, 1);
}

TEST(MasterDiff, PacksExactlyTheRowsAskedFor) {
  auto m = make_master_manager(32);
  auto master = make_master(*m);
  EXPECT_EQ(master->n_tokens(), 9);
  EXPECT_EQ(std::vector<int32_t>(master->tokens().begin(), master->tokens().end()),
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  auto diff = SegmentDiff::extract(master, master->view().slots, 50, {0, 3, 4, 5, 8});
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->n_blocks(), 2);
  EXPECT_EQ(diff->pos0(), 50);
  auto empty = SegmentDiff::extract(master, master->view().slots, 9, {});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->n_blocks(), 0);
}

TEST(MasterDiff, MastersAreFreedWhenTheLastDiffGoesInAnyOrder) {
  for (int order = 0; order < 6; ++order) {
    auto m = make_master_manager(64);
    std::optional<std::shared_ptr<const MasterSegment>> master = make_master(*m);
    const int64_t master_blocks = 3;
    EXPECT_EQ(m->pool().stats().n_used, master_blocks);
    std::vector<std::optional<SegmentDiff>> diffs;
    for (int a = 0; a < 3; ++a) {
      diffs.push_back(SegmentDiff::extract(*master, (*master)->view().slots, 10 * a, {a, a + 4}));
      ASSERT_TRUE(diffs.back());
    }
    master.reset();  // only the diffs hold it now
    EXPECT_EQ(m->pool().stats().n_used, master_blocks + 3);
    std::vector<int> seq = {0, 1, 2};
    for (int i = 0; i < order; ++i) std::next_permutation(seq.begin(), seq.end());
    for (size_t i = 0; i < seq.size(); ++i) {
      diffs[size_t(seq[i])].reset();
      const int64_t left = int64_t(seq.size() - i - 1);
      EXPECT_EQ(m->pool().stats().n_used, left ? master_blocks + left : 0) << "order " << order << " step " << i;
    }
  }
}

TEST(MasterDiff, PoolTooSmallForADiffIsReportedNotFatal) {
  auto m = make_master_manager(3);
  auto master = make_master(*m);
  EXPECT_FALSE(SegmentDiff::extract(master, master->view().slots, 0, {0, 1}));
  EXPECT_FALSE(PackedKv::pack(*m, master->view().slots, 4));
  EXPECT_EQ(m->pool().stats().n_used, 3);
}

}  // namespace
}  // namespace agentkv
