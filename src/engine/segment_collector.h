// The KV collector (share/kv_collector.h) on an engine's retained snapshots: for one all-gather round,
// every agent's copy of the shared segment, built in one collective step from one master, becomes a
// retained snapshot the agent's own prompt then continues from (RequestParams::kv_from). Called by
// the one collective round (engine/collective_round.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "share/selective_recompute.h"

namespace agentkv {

struct CollectedCopy {
  uint64_t handle = 0;                  // retained snapshot: [agent prefix][blended segment]
  std::vector<int32_t> recomputed_slots;  // the agent's diff against the re-rotated master
};

// master: a retained snapshot whose slots [master_start, master_start + segment.size()) hold the
// segment (e.g. a prefill of [BOS][segment]). prefixes: one retained snapshot per agent holding
// exactly its context before the segment. Each result is a new snapshot (the prefix's blocks shared,
// the segment's blocks its own) marked approximate from the segment on, so nothing blended ever
// serves an exact prefix-cache hit. The inputs stay retained; the caller releases them. All or
// nothing: on error no snapshot is created.
Result<std::vector<CollectedCopy>> collect_shared_segment(Engine& engine, uint64_t master, int32_t master_start,
                                                          std::span<const int32_t> segment,
                                                          std::span<const uint64_t> prefixes,
                                                          const RecomputeOptions& options);

}  // namespace agentkv
