// Master–diff storage with a tiny hand-made geometry (no model): the effective K/V of an agent
// (master re-rotated + diff rows) must equal the dense blended copy it replaces, byte for byte, and
// masters must be freed exactly when their last diff goes, whatever the order.
#include "share/master_diff.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ops/rope.h"

namespace agentkv {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = "test";
  c.n_layer = 3;
  c.n_head = 2;
  c.n_head_kv = 2;
  c.head_dim = 8;
  c.n_rot = 8;
  return c;
}
constexpr int kBlock = 4;

std::unique_ptr<KvManager> make_manager(int64_t n_blocks) {
  KvManagerOptions opt;
  opt.block_size = kBlock;
  opt.mem_bytes = n_blocks * KvArena::bytes_per_block(tiny_config(), kBlock);
  auto m = KvManager::create(tiny_config(), 1, opt);
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(m).value();
}

// Each layer with its own RoPE base, as Gemma 3's local and global layers have.
KRotateFn rotator() {
  return [](int layer, float* k, int64_t delta) {
    const Rope rope(8, 8, layer == 1 ? 10000.0f : 1000000.0f, layer == 2 ? RopeStyle::kNeox : RopeStyle::kNorm);
    rope.apply(k, 2, delta);
  };
}

void fill_random(KvManager& m, std::span<const int32_t> blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> row(size_t(m.arena().kv_dim()));
  for (int32_t b : blocks)
    for (int l = 0; l < m.arena().n_layer(); ++l)
      for (int s = 0; s < kBlock; ++s) {
        for (float& x : row) x = u(rng);
        kv_store(m.arena().layer(l).k(b, s), row.data(), int(row.size()));
        for (float& x : row) x = u(rng);
        kv_store(m.arena().layer(l).v(b, s), row.data(), int(row.size()));
      }
}

std::vector<kv_t> read_rows(const KvManager& m, KvSlots s, int64_t n) {
  std::vector<kv_t> out;
  const int dim = m.arena().kv_dim();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = s.slot0 + i;
    for (int l = 0; l < m.arena().n_layer(); ++l) {
      const PagedKvLayer L = m.arena().layer(l);
      const kv_t* k = L.k(s.table[size_t(slot / kBlock)], int(slot % kBlock));
      const kv_t* v = L.v(s.table[size_t(slot / kBlock)], int(slot % kBlock));
      out.insert(out.end(), k, k + dim);
      out.insert(out.end(), v, v + dim);
    }
  }
  return out;
}

TEST(MasterDiff, EffectiveKvEqualsTheDenseBlendedCopyExactly) {
  auto m = make_manager(64);
  // Where the master's K/V was computed: slots [3, 3 + 10) of some sequence, positions [7, 17).
  std::vector<int32_t> src;
  ASSERT_TRUE(m->pool().allocate_n(4, src));
  fill_random(*m, src, 1);
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  auto master = MasterSegment::create(*m, tokens, KvSlots{src, 3}, 7);
  ASSERT_TRUE(master);
  EXPECT_EQ(read_rows(*m, KvSlots{(*master)->blocks(), 0}, 10), read_rows(*m, KvSlots{src, 3}, 10));

  // An agent holds the segment at its slots [6, 16), positions [40, 50): its dense blended copy is
  // the master moved there, with rows 0, 4 and 9 recomputed (here: overwritten with other values).
  std::vector<int32_t> agent;
  ASSERT_TRUE(m->pool().allocate_n(4, agent));
  copy_kv_rows(m->arena(), KvSlots{(*master)->blocks(), 0}, KvSlots{agent, 6}, 10, 40 - 7, rotator());
  std::vector<int32_t> other;
  ASSERT_TRUE(m->pool().allocate_n(3, other));
  fill_random(*m, other, 2);
  for (int r : {0, 4, 9}) copy_kv_rows(m->arena(), KvSlots{other, r}, KvSlots{agent, 6 + r}, 1, 0, nullptr);
  const std::vector<kv_t> dense = read_rows(*m, KvSlots{agent, 6}, 10);
  // Re-rotation really moved K: the copy differs from the master where rows were not recomputed.
  EXPECT_NE(read_rows(*m, KvSlots{agent, 6 + 1}, 1), read_rows(*m, KvSlots{(*master)->blocks(), 1}, 1));

  auto diff = SegmentDiff::extract(*master, KvSlots{agent, 6}, 40, {0, 4, 9});
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->n_blocks(), 1) << "three rows pack into one block of four";
  // Materialized somewhere else (other slots, same positions): byte-identical.
  std::vector<int32_t> scratch;
  ASSERT_TRUE(m->pool().allocate_n(4, scratch));
  fill_random(*m, scratch, 3);
  diff->materialize(KvSlots{scratch, 1}, rotator());
  EXPECT_EQ(read_rows(*m, KvSlots{scratch, 1}, 10), dense);
}

TEST(MasterDiff, ReRotationComposesToTheDirectRotation) {
  // K rotated to p and then moved by q - p equals K rotated to q, within f16 storage rounding.
  const Rope rope(8, 8, 10000.0f, RopeStyle::kNorm);
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> k(16), at_p, at_q;
  for (float& x : k) x = u(rng);
  at_p = k;
  rope.apply(at_p.data(), 2, 13);
  at_q = k;
  rope.apply(at_q.data(), 2, 1000);
  rope.apply(at_p.data(), 2, 1000 - 13);
  for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(at_p[i], at_q[i], 1e-4f) << i;
}

TEST(MasterDiff, MastersAreFreedWhenTheLastDiffGoesInAnyOrder) {
  for (int order = 0; order < 6; ++order) {
    auto m = make_manager(64);
    std::vector<int32_t> src;
    ASSERT_TRUE(m->pool().allocate_n(3, src));
    fill_random(*m, src, 5);
    const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    auto master = MasterSegment::create(*m, tokens, KvSlots{src, 0}, 0);
    ASSERT_TRUE(master);
    m->pool().release(src);
    const int64_t master_blocks = 3;
    EXPECT_EQ(m->pool().stats().n_used, master_blocks);
    std::vector<std::optional<SegmentDiff>> diffs;
    for (int a = 0; a < 3; ++a) {
      diffs.push_back(SegmentDiff::extract(*master, KvSlots{(*master)->blocks(), 0}, 10 * a, {a, a + 4}));
      ASSERT_TRUE(diffs.back());
    }
    master->reset();  // only the diffs hold it now
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

}  // namespace
}  // namespace agentkv
