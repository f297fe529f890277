// A round-0 segment of the agent-society workload blended into every agent's copy by selective
// recompute: the master, the agents' dense copies and what recompute reported. What the master–diff
// model tests build their diffs from.
#pragma once

#include <memory>
#include <vector>

#include "share/master_diff.h"
#include "share_round_util.h"

namespace agentkv::testing {

// A round-0 segment blended into every agent's copy at R = 0.15: the master, the agents' dense
// copies and what selective recompute reported. The manager outlives everything in its blocks.
struct BlendedRound {
  std::unique_ptr<KvManager> km;
  RoundTokens r;
  int32_t mstart = 0;
  std::shared_ptr<const MasterSegment> master;
  std::shared_ptr<const KvSequence> master_seq;  // the master's whole sequence ([BOS][segment]), shared
  std::vector<KvSequence> agents;
  std::vector<AgentSegment> segs;
  std::vector<AgentRecompute> res;
};

inline void blend_round(const LoadedModel& lm, ThreadPool& pool, BlendedRound& b) {
  KvManagerOptions ko;
  ko.mem_bytes = int64_t(256) << 20;
  ko.block_size = kRoundBlockSize;
  auto km = KvManager::create(lm.config(), lm.fingerprint, ko);
  ASSERT_TRUE(km.ok());
  b.km = std::move(km).value();
  KvManager& m = *b.km;
  b.r = round_tokens(lm, "agent-society", 4, 7);
  const RoundTokens& r = b.r;
  const int32_t n_seg = int32_t(r.segment.size());

  // The master: [BOS][segment], computed once.
  KvSequence mseq(m);
  std::vector<int32_t> mtoks;
  if (lm.tokenizer->add_bos_default()) mtoks.push_back(lm.tokenizer->bos_id());
  b.mstart = int32_t(mtoks.size());
  mtoks.insert(mtoks.end(), r.segment.begin(), r.segment.end());
  ASSERT_TRUE(mseq.reserve(int64_t(mtoks.size())));
  prefill(*lm.model, m.arena(), mseq.blocks(), mtoks, 0, 0, false, pool);
  mseq.commit(mtoks);
  b.master_seq = std::make_shared<const KvSequence>(mseq.fork());
  b.master = std::make_shared<const MasterSegment>(std::move(mseq), b.mstart, b.mstart);
  EXPECT_EQ(b.master->n_tokens(), n_seg);

  // Agents: prefix prefill, then the segment by selective recompute, all in one call.
  b.agents.reserve(r.n_agents());
  for (size_t a = 0; a < r.n_agents(); ++a) {
    b.agents.emplace_back(m);
    KvSequence& s = b.agents.back();
    ASSERT_TRUE(s.reserve(int64_t(r.prefix[a].size()) + n_seg));
    prefill(*lm.model, m.arena(), s.blocks(), r.prefix[a], 0, 0, false, pool);
    const int32_t p = int32_t(r.prefix[a].size());
    b.segs.push_back(AgentSegment{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, p, p});
  }
  RecomputeOptions ro;
  ro.ratio = 0.15;
  auto res = selective_recompute(*lm.model, m.arena(), b.master->view(), r.segment, b.segs, ro, pool);
  ASSERT_TRUE(res.ok()) << res.error();
  b.res = std::move(*res);
}

}  // namespace agentkv::testing
