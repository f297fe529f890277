// The KV collector (TokenDance, issue 5): for one all-gather round, every agent's copy of the shared
// segment is built in one collective step from one master. Each copy is a new sequence: the agent's
// prefix blocks shared (a fork), then the segment written by selective recompute (the master
// re-rotated to the agent's positions, the most deviating tokens recomputed, all agents in one
// batched pass), marked approximate from the segment on so nothing blended ever serves an exact
// prefix-cache hit. The engine's collective round (engine/collective_round.h) runs it on retained
// snapshots (engine/segment_collector.h); this is the algorithm over sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"
#include "share/master_diff.h"
#include "share/selective_recompute.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

struct BlendedCopy {
  KvSequence seq;                         // [agent prefix][blended segment]
  std::vector<int32_t> recomputed_slots;  // the agent's diff against the re-rotated master
  std::vector<PlacedSegmentDiff> diffs;   // the prefix's master–diff runs (its holes), as given
};

// master: a sequence whose slots [master_start, master_start + segment.size()) hold the segment
// (e.g. a prefill of [BOS][segment]). prefixes: each agent's context before the segment.
// prefix_diffs: empty, or per prefix the master–diff runs whose blocks are holes in it (a context
// kept in master–diff form, engine/compact_context.h): the recompute reads them in place
// (share/master_diff_attention.h) and the copy keeps them. All or nothing: on error no copy is made
// (kResourceExhausted when the KV budget cannot hold them).
Result<std::vector<BlendedCopy>> collect_segment_copies(const Model& model, const KvSequence& master,
                                                        int32_t master_start, std::span<const int32_t> segment,
                                                        std::span<const KvSequence* const> prefixes,
                                                        const RecomputeOptions& options, ThreadPool& pool,
                                                        std::span<const std::vector<PlacedSegmentDiff>> prefix_diffs = {});

}  // namespace agentkv
