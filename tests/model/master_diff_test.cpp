// Master–diff on the real models, over an agent-society round: each agent's effective K/V (master
// re-rotated + its diff rows) equals, bit for bit, the dense blended copy selective recompute made;
// the diff holds only the recomputed rows, and the segment's own prompt/answer K/V packs and restores
// exactly. In each diff format (kv/kv_diff_codec.h) the diff keeps only the rows that differ from the
// re-rotated master (all of them recomputed ones), and restores them bit for bit (f16) or within the
// format's stated bound on every element (int8, int4), the other rows bit for bit.
#include "share/master_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "ops/fp16.h"

#include "blended_round.h"

namespace agentkv {
namespace {

using testing::blend_round;
using testing::BlendedRound;
using testing::real_model;
using testing::same_kv_bits;

class MasterDiffModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MasterDiffModelTest, EffectiveKvEqualsTheDenseBlendedCopy) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  BlendedRound b;
  ASSERT_NO_FATAL_FAILURE(blend_round(lm, pool, b));
  KvManager& m = *b.km;
  const testing::RoundTokens& r = b.r;
  const int32_t n_seg = int32_t(r.segment.size()), mstart = b.mstart;
  const auto& master = b.master;
  auto& agents = b.agents;
  const auto& segs = b.segs;
  const auto& res = b.res;

  for (size_t a = 0; a < r.n_agents(); ++a) {
    const int32_t p = int32_t(r.prefix[a].size());
    std::vector<int32_t> rows;
    for (int32_t slot : res[a].recomputed_slots) rows.push_back(slot - p);
    const KvSlotRange dense{segs[a].blocks, p};
    auto diff = SegmentDiff::extract(master, dense, p, rows);
    ASSERT_TRUE(diff);
    EXPECT_EQ(diff->rows().size(), rows.size());
    EXPECT_LT(int64_t(rows.size()), n_seg) << "R = 0.15 recomputes a minority of the segment";
    EXPECT_EQ(diff->n_blocks(), (int64_t(rows.size()) + 15) / 16);
    // Materialized into fresh blocks at another in-block offset: the same bits as the dense copy.
    KvSequence scratch(m);
    ASSERT_TRUE(scratch.reserve(n_seg + 5));
    const KvSlotRange dst{SeqBlocks{scratch.blocks().data(), int32_t(scratch.blocks().size())}, 5};
    ASSERT_TRUE(diff->materialize(*lm.model, dst, pool).ok());
    EXPECT_TRUE(same_kv_bits(m.arena(), agents[a].blocks(), p, m.arena(), scratch.blocks(), 5, n_seg))
        << "agent " << a;
    // Without the diff rows it would not be: the recomputed rows really differ from the master.
    if (!rows.empty()) {
      const int32_t row = rows.back();
      EXPECT_FALSE(same_kv_bits(m.arena(), agents[a].blocks(), p + row, m.arena(), master->view().slots.blocks.table
                                    ? std::vector<int32_t>(master->view().slots.blocks.table,
                                                           master->view().slots.blocks.table + master->n_blocks())
                                    : std::vector<int32_t>{},
                                mstart + row, 1));
    }
    // Dense runs (the agent's prefix here) pack and restore exactly.
    auto pk = PackedKv::pack(m, KvSlotRange{segs[a].blocks, 0}, p);
    ASSERT_TRUE(pk);
    KvSequence back(m);
    ASSERT_TRUE(back.reserve(p + 3));
    pk->restore(KvSlotRange{SeqBlocks{back.blocks().data(), int32_t(back.blocks().size())}, 3});
    EXPECT_TRUE(same_kv_bits(m.arena(), agents[a].blocks(), 0, m.arena(), back.blocks(), 3, p));
  }
}

INSTANTIATE_TEST_SUITE_P(BothModels, MasterDiffModelTest, ::testing::Values("smollm2", "gemma3"));

class DiffFormatModelTest : public ::testing::TestWithParam<std::tuple<std::string, DiffFormat>> {};

TEST_P(DiffFormatModelTest, DiffKeepsOnlyDifferingRowsAndRestoresThemWithinTheFormatsBound) {
  const auto [model, format] = GetParam();
  const LoadedModel& lm = real_model(model);
  ThreadPool pool(0);
  BlendedRound b;
  ASSERT_NO_FATAL_FAILURE(blend_round(lm, pool, b));
  KvManager& m = *b.km;
  const KvArena& arena = m.arena();
  const int bs = m.block_size();
  const int32_t n_seg = int32_t(b.r.segment.size());
  const int head_dim = lm.config().head_dim;
  for (size_t a = 0; a < b.agents.size(); ++a) {
    const int32_t p = b.segs[a].slot0;
    const KvSlotRange dense{b.segs[a].blocks, p};
    auto rows = SegmentDiff::differing_rows(*lm.model, *b.master, dense, p, pool);
    ASSERT_TRUE(rows);
    // Rows not recomputed hold the re-rotated master exactly: the diff never stores them.
    std::vector<int32_t> recomputed;
    for (int32_t slot : b.res[a].recomputed_slots) recomputed.push_back(slot - p);
    EXPECT_TRUE(std::includes(recomputed.begin(), recomputed.end(), rows->begin(), rows->end())) << "agent " << a;
    EXPECT_FALSE(rows->empty());
    std::printf("%s agent %zu: %zu of %zu recomputed rows differ from the re-rotated master\n", model.c_str(), a,
                rows->size(), recomputed.size());

    auto diff = SegmentDiff::extract(b.master, dense, p, *rows, DiffPacking{format, lm.model.get(), &pool});
    ASSERT_TRUE(diff);
    const KvRowCodec& codec = diff->packed_rows()->codec();
    const int64_t per_block = arena.bytes_per_block() / int64_t(codec.record_bytes());
    EXPECT_EQ(diff->n_blocks(), (int64_t(rows->size()) + per_block - 1) / per_block);

    KvSequence scratch(m);
    ASSERT_TRUE(scratch.reserve(n_seg + 5));
    const KvSlotRange dst{SeqBlocks{scratch.blocks().data(), int32_t(scratch.blocks().size())}, 5};
    ASSERT_TRUE(diff->materialize(*lm.model, dst, pool).ok());
    size_t j = 0;
    double worst = 0;  // the largest error as a share of its bound
    for (int32_t i = 0; i < n_seg; ++i) {
      const bool in_diff = j < rows->size() && (*rows)[j] == i;
      const int32_t ds = p + i, rs = 5 + i;
      if (!in_diff || diff_format_lossless(format)) {
        EXPECT_TRUE(testing::same_kv_bits(arena, b.agents[a].blocks(), ds, arena, scratch.blocks(), rs, 1))
            << "agent " << a << " row " << i << (in_diff ? " (a diff row, lossless)" : " (the master's)");
        j += in_diff;
        continue;
      }
      const uint8_t* rec = diff->row_record(j++);
      for (int l = 0; l < arena.n_layer(); ++l)
        for (int kv = 0; kv < 2; ++kv) {
          const PagedKvLayer L = arena.layer(l);
          const kv_t* want = kv ? L.v(b.agents[a].blocks()[size_t(ds / bs)], ds % bs)
                                : L.k(b.agents[a].blocks()[size_t(ds / bs)], ds % bs);
          const kv_t* got = kv ? L.v(scratch.blocks()[size_t(rs / bs)], rs % bs) : L.k(scratch.blocks()[size_t(rs / bs)], rs % bs);
          const uint8_t* vec = rec + size_t(2 * l + kv) * codec.vector_bytes();
          for (int e = 0; e < arena.kv_dim(); ++e) {
            const float err = std::fabs(fp16_to_f32(got[e]) - fp16_to_f32(want[e]));
            const float bound = codec.error_bound(codec.scale(vec, e / head_dim), got[e]);
            ASSERT_LE(err, bound) << "agent " << a << " row " << i << " layer " << l << (kv ? " V" : " K") << " element " << e;
            if (bound > 0) worst = std::max(worst, double(err) / double(bound));
          }
        }
    }
    EXPECT_EQ(j, rows->size());
    if (!diff_format_lossless(format)) {
      EXPECT_GT(worst, 0.0) << "a lossy format that loses nothing is suspicious";
    }
  }
}

// A diff that keeps only the rows deviating most (SegmentDiff::most_deviating_rows, what an echo keeps,
// engine/compact_context.h): it picks that share of the differing rows, those of the largest relative
// deviation (checked against the deviation computed here from the rows themselves), share 1 keeps every
// differing row, and materialized losslessly the kept rows are the dense copy's bit for bit and every other
// row is the re-rotated master's bit for bit.
TEST_P(MasterDiffModelTest, MostDeviatingRowsKeepTheLargestDeviationsAndServeTheRestFromTheMaster) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  BlendedRound b;
  ASSERT_NO_FATAL_FAILURE(blend_round(lm, pool, b));
  KvManager& m = *b.km;
  const KvArena& arena = m.arena();
  const int32_t n_seg = int32_t(b.r.segment.size());
  for (size_t a = 0; a < b.agents.size(); ++a) {
    const int32_t p = b.segs[a].slot0;
    const KvSlotRange dense{b.segs[a].blocks, p};
    auto all = SegmentDiff::differing_rows(*lm.model, *b.master, dense, p, pool);
    ASSERT_TRUE(all);
    auto same = SegmentDiff::most_deviating_rows(*lm.model, *b.master, dense, p, 1.0, pool);
    ASSERT_TRUE(same);
    EXPECT_EQ(*same, *all);
    const double share = 0.05;
    auto rows = SegmentDiff::most_deviating_rows(*lm.model, *b.master, dense, p, share, pool);
    ASSERT_TRUE(rows);
    const size_t want = std::min(all->size(), size_t(std::ceil(share * n_seg)));
    ASSERT_EQ(rows->size(), want) << "agent " << a;
    EXPECT_TRUE(std::is_sorted(rows->begin(), rows->end()));
    EXPECT_TRUE(std::includes(all->begin(), all->end(), rows->begin(), rows->end()));

    // The master re-rotated alone (a diff with no rows), and each row's deviation from it.
    KvSequence base(m);
    ASSERT_TRUE(base.reserve(n_seg));
    const KvSlotRange base_at{SeqBlocks{base.blocks().data(), int32_t(base.blocks().size())}, 0};
    auto none = SegmentDiff::extract(b.master, dense, p, {});
    ASSERT_TRUE(none);
    ASSERT_TRUE(none->materialize(*lm.model, base_at, pool).ok());
    auto deviation = [&](int32_t i) {
      double d = 0;
      for (int l = 0; l < arena.n_layer(); ++l)
        for (int which = 0; which < 2; ++which) {
          const auto x = testing::read_kv_row(arena, b.agents[a].blocks(), p + i, l, which);
          const auto y = testing::read_kv_row(arena, base.blocks(), i, l, which);
          double diff = 0, norm = 0;
          for (size_t e = 0; e < x.size(); ++e) {
            diff += double(x[e] - y[e]) * double(x[e] - y[e]);
            norm += double(x[e]) * double(x[e]);
          }
          d += diff == 0 ? 0 : diff / std::max(norm, 1e-30);
        }
      return d;
    };
    double kept_min = 1e300, left_max = 0;
    for (int32_t i : *all) {
      const double d = deviation(i);
      EXPECT_GT(d, 0) << "a differing row deviates";
      if (std::binary_search(rows->begin(), rows->end(), i)) kept_min = std::min(kept_min, d);
      else left_max = std::max(left_max, d);
    }
    EXPECT_GE(kept_min, left_max * (1 - 1e-9)) << "agent " << a << ": a row left out deviates more than one kept";

    auto diff = SegmentDiff::extract(b.master, dense, p, *rows);
    ASSERT_TRUE(diff);
    KvSequence scratch(m);
    ASSERT_TRUE(scratch.reserve(n_seg));
    ASSERT_TRUE(diff->materialize(*lm.model, KvSlotRange{SeqBlocks{scratch.blocks().data(), int32_t(scratch.blocks().size())}, 0}, pool).ok());
    for (int32_t i = 0; i < n_seg; ++i) {
      const bool kept = std::binary_search(rows->begin(), rows->end(), i);
      if (kept)
        EXPECT_TRUE(same_kv_bits(arena, b.agents[a].blocks(), p + i, arena, scratch.blocks(), i, 1)) << "row " << i;
      else
        EXPECT_TRUE(same_kv_bits(arena, base.blocks(), i, arena, scratch.blocks(), i, 1)) << "row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothModelsEveryFormat, DiffFormatModelTest, testing::both_models_every_format(),
                         testing::model_format_name);

}  // namespace
}  // namespace agentkv
