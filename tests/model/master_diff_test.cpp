// Master–diff on the real models, over an agent-society round: each agent's effective K/V (master
// re-rotated + its diff rows) equals, bit for bit, the dense blended copy selective recompute made;
// the diff holds only the recomputed rows, and the segment's own prompt/answer K/V packs and restores
// exactly.
#include "share/master_diff.h"

#include "share_round_util.h"

namespace agentkv {
namespace {

using testing::prefill;
using testing::real_model;
using testing::round_tokens;
using testing::same_kv_bits;

class MasterDiffModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MasterDiffModelTest, EffectiveKvEqualsTheDenseBlendedCopy) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  KvManagerOptions ko;
  ko.mem_bytes = int64_t(256) << 20;
  ko.block_size = testing::kRoundBlockSize;
  auto km = KvManager::create(lm.config(), lm.fingerprint, ko);
  ASSERT_TRUE(km.ok());
  KvManager& m = **km;
  const testing::RoundTokens r = round_tokens(lm, "agent-society", 4, 7);
  const int32_t n_seg = int32_t(r.segment.size());

  // The master: [BOS][segment], computed once.
  KvSequence mseq(m);
  std::vector<int32_t> mtoks;
  if (lm.tokenizer->add_bos_default()) mtoks.push_back(lm.tokenizer->bos_id());
  const int32_t mstart = int32_t(mtoks.size());
  mtoks.insert(mtoks.end(), r.segment.begin(), r.segment.end());
  ASSERT_TRUE(mseq.reserve(int64_t(mtoks.size())));
  prefill(*lm.model, m.arena(), mseq.blocks(), mtoks, 0, 0, false, pool);
  mseq.commit(mtoks);
  auto master = std::make_shared<const MasterSegment>(std::move(mseq), mstart, mstart);
  EXPECT_EQ(master->n_tokens(), n_seg);

  // Agents: prefix prefill, then the segment by selective recompute, all in one call.
  std::vector<KvSequence> agents;
  std::vector<AgentSegment> segs;
  for (size_t a = 0; a < r.n_agents(); ++a) {
    agents.emplace_back(m);
    KvSequence& s = agents.back();
    ASSERT_TRUE(s.reserve(int64_t(r.prefix[a].size()) + n_seg));
    prefill(*lm.model, m.arena(), s.blocks(), r.prefix[a], 0, 0, false, pool);
    const int32_t p = int32_t(r.prefix[a].size());
    segs.push_back(AgentSegment{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, p, p});
  }
  RecomputeOptions ro;
  ro.ratio = 0.15;
  auto res = selective_recompute(*lm.model, m.arena(), master->view(), r.segment, segs, ro, pool);
  ASSERT_TRUE(res.ok()) << res.error();

  for (size_t a = 0; a < r.n_agents(); ++a) {
    const int32_t p = int32_t(r.prefix[a].size());
    std::vector<int32_t> rows;
    for (int32_t slot : (*res)[a].recomputed_slots) rows.push_back(slot - p);
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

}  // namespace
}  // namespace agentkv
