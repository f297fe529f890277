// A context in master–diff form (TokenDance's storage: issue 5 for /v1/rounds, issue 14 for chat).
// A context whose runs of tokens were blended from masters by the KV collector, e.g.
// [exact prefix][blended segment][own turn] after a round, or a chat context with several blended runs
// of message segments, is kept as
//   - its sequence with the blocks that lie wholly inside a blended run dropped (holes,
//     KvSequence::drop_blocks); every other block (the exact prefix, blocks straddling a run's edges,
//     the agent's own turns) is kept as it is, shared, not copied, except an own turn's text that a
//     later master quotes (an echo, find_echoes below), stored as a run of that master;
//   - per run with dropped blocks, a SegmentDiff: a reference to the master's slots for exactly the
//     dropped slots (a MasterSegment pinning those master blocks alone) and only the recomputed rows
//     among them, all runs' rows packed together (SegmentDiff::extract_packed);
// so no dense per-agent copy of a blended run lives between turns. expand() rebuilds the dense
// context bit for bit (the master re-rotated to the agent's positions, then the diff rows: what the
// collector wrote) just before a turn resumes from it. The kept sequence still holds the K/V of its
// dense slots: a chat context serves as a master for the segments there (kv/segment_store.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "kv/kv_manager.h"
#include "kv/segment_store.h"
#include "model/model.h"
#include "share/master_diff.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// One blended run of a dense context: its slots [begin, begin + n) hold the master's slots
// [master_start, master_start + n) re-rotated to positions begin.., then some of them recomputed or
// rewritten (compact() finds which by comparing with the re-rotated master).
struct BlendedRun {
  int64_t begin = 0;
  int64_t n = 0;
  std::shared_ptr<const KvSequence> master;
  int32_t master_start = 0;
  // The share of the run's rows its diff keeps: 1 keeps every row that differs from the re-rotated master
  // (expand() gives the dense run back within the format's bound); below 1 only that share of the rows,
  // those that deviate most (SegmentDiff::most_deviating_rows), the others served from the master: an
  // approximation, for a run the context computed itself that a master also holds (find_echoes).
  double keep = 1;
};

// Echoes: runs of at least `min_tokens` tokens in slots [from, to) of `ctx` whose tokens the master's
// slots [master_start, end) also hold, e.g. an agent's own answer of the round before, quoted in this
// round's shared block ("Name: text"). Each becomes a BlendedRun of that master keeping `keep` of its rows,
// so the text is stored once, as the master's rows, plus the rows where the agent's copy deviates most
// (TokenDance: "an agent's answer that reappears in the next round's digest need not be stored twice").
// Greedy from `from`: at each slot the longest match (the earliest of equals), then after it.
std::vector<BlendedRun> find_echoes(const KvSequence& ctx, int64_t from, int64_t to,
                                    const std::shared_ptr<const KvSequence>& master, int32_t master_start,
                                    int64_t min_tokens, double keep);
// An echo setting as the command lines take it (EngineOptions::echo_keep): "off" (nullopt) or a share
// in [0, 1]; an error names the text and the choices.
Result<std::optional<double>> parse_echo_keep(std::string_view text);

// The block range [first, last) wholly inside slots [begin, begin + n): what a run's compact form
// drops (empty when the run does not cover a whole block).
std::pair<int64_t, int64_t> droppable_blocks(int64_t begin, int64_t n, int block_size);

class CompactContext : public SegmentStore::Detached {
 public:
  // A diff kept for slots [begin, begin + diff->master()->n_tokens()) of the context.
  using PlacedDiff = PlacedSegmentDiff;

  // dense: the context; runs: its blended runs (ascending, disjoint, inside it; each run's slots must
  // hold the master's tokens; a run keeping less than all its differing rows, BlendedRun::keep, is
  // restored approximately). inherited: diffs of a context `dense` resumed from, re-packed with the
  // new ones (same masters). A diff keeps exactly the rows where `dense` differs from the master
  // re-rotated (SegmentDiff::differing_rows: the recomputed ones, less any that came out equal, and
  // any rewritten after the blend), stored in `format` (kv/kv_diff_codec.h), so expand() gives
  // `dense` back bit for bit with a lossless format and within the format's bound with a lossy one
  // (an inherited diff's rows, restored, are encoded again: each compaction's bound holds against the
  // context it was given). An inherited diff whose blocks are holes in `dense` (a context resumed in
  // attention) has its records copied as they are; one in another format than `format` (a run a turn
  // read losslessly, engine.h compact_retained) is kept as it is, its packed rows shared.
  // nullopt when the pool cannot hold the packed rows or the scratch re-rotation, or a run is malformed.
  static std::optional<CompactContext> compact(const KvSequence& dense, const std::vector<BlendedRun>& runs,
                                               const Model& model, ThreadPool& pool,
                                               DiffFormat format = DiffFormat::kF16,
                                               std::vector<PlacedDiff> inherited = {});

  // A context that already is in master–diff form: `kept` has holes exactly where `diffs` stand (a
  // sequence resumed from a compact context and read through its diffs, engine/sequence.h).
  static CompactContext adopt(std::shared_ptr<const KvSequence> kept, std::vector<PlacedDiff> diffs);

  // A dense copy to resume from (approximate from where the dense context was). nullopt when the pool
  // is short.
  std::optional<KvSequence> expand(const Model& model, ThreadPool& pool) const;

  // The sequence with the dropped blocks as holes (its tokens are all the context's).
  const std::shared_ptr<const KvSequence>& kept() const { return kept_; }
  const std::vector<PlacedDiff>& diffs() const { return diffs_; }
  // The diffs whose runs end at or before slot `limit`: what a context resumed from this one, and
  // identical to it up to `limit`, inherits (compact()'s `inherited`).
  std::vector<PlacedDiff> diffs_within(int64_t limit) const;
  int64_t n_tokens() const { return kept_->n_tokens(); }
  // Blocks expand() allocates (the dropped ones).
  int64_t n_dropped() const { return kept_->n_holes(); }
  // Blocks this context holds on its own: the diffs' packed rows and the kept blocks from the first
  // diff's run on (the exact prefix before it and the masters are shared).
  int64_t own_blocks() const;

  // SegmentStore::Detached: the diffs' blocks and the master blocks they pin.
  void add_block_refs(std::vector<int32_t>& out) const override;
  int64_t diff_blocks() const override;
  // The bytes of the diffs' row records (diff_blocks() rounds them up to whole blocks).
  int64_t diff_payload_bytes() const;
  // The packed rows its diffs are in: one set, and any kept from a context it resumed from in another
  // format (shared with that context while it lives).
  std::vector<const PackedKv*> packings() const;

 private:
  CompactContext(std::shared_ptr<const KvSequence> kept, std::vector<PlacedDiff> diffs)
      : kept_(std::move(kept)), diffs_(std::move(diffs)) {}
  std::shared_ptr<const KvSequence> kept_;
  std::vector<PlacedDiff> diffs_;  // ascending
};

}  // namespace agentkv
