// A retained context in master–diff form (TokenDance's storage, issue 5). After a round whose block
// came from the KV collector, an agent's dense context is [exact prefix][blended segment][own turn].
// Between rounds it is kept as
//   - the exact prefix's full blocks (shared with the prefix cache and other agents, as before),
//   - the few prefix rows of a partial block before the segment, packed,
//   - a SegmentDiff: a reference to the round's master and only the recomputed rows, packed,
//   - the rows after the segment (the agent's own prompt and answer), packed,
// so no dense per-agent copy of the segment lives between rounds. expand() rebuilds the dense context
// bit for bit (the master re-rotated to the agent's positions, then the diff rows: what the
// collector wrote) just before the agent's next turn resumes from it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"
#include "share/master_diff.h"
#include "util/thread_pool.h"

namespace agentkv {

class CompactContext {
 public:
  // dense: the agent's context; its slots [seg_begin, seg_begin + master->n_tokens()) hold the
  // segment as the collector made it from `master` (re-rotated to positions seg_begin.., then the
  // segment-relative `rows` recomputed). nullopt when the pool cannot hold the packed rows.
  static std::optional<CompactContext> compact(const KvSequence& dense, int64_t seg_begin,
                                               std::shared_ptr<const MasterSegment> master, std::vector<int32_t> rows);

  // A dense copy to resume from, marked approximate from the segment on. nullopt when the pool is short.
  std::optional<KvSequence> expand(const Model& model, ThreadPool& pool) const;

  int64_t n_tokens() const { return int64_t(tokens_.size()); }
  // Blocks this context holds on its own (packed rows; the prefix and master blocks are shared).
  int64_t own_blocks() const;

 private:
  CompactContext(KvSequence prefix, PackedKv gap, SegmentDiff diff, PackedKv tail, std::vector<int32_t> tokens,
                 int64_t seg_begin)
      : prefix_(std::move(prefix)), gap_(std::move(gap)), diff_(std::move(diff)), tail_(std::move(tail)),
        tokens_(std::move(tokens)), seg_begin_(seg_begin) {}
  KvSequence prefix_;    // full blocks of [0, seg_begin), the rows of a partial one cut off
  PackedKv gap_;         // rows [prefix_.n_tokens(), seg_begin)
  SegmentDiff diff_;
  PackedKv tail_;        // rows after the segment
  std::vector<int32_t> tokens_;
  int64_t seg_begin_;
};

}  // namespace agentkv
