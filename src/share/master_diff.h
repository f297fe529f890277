// Master–diff storage of a shared segment's KV (TokenDance, arXiv 2604.03143). In an all-gather
// round every agent holds the same segment (last round's messages) at a different position. Its K/V
// is stored once, densely, as a MasterSegment; each agent keeps only a SegmentDiff: the rows its
// selective recompute changed (share/selective_recompute.h), packed into pool blocks, plus a
// reference to the master. Before the agent attends to the segment, materialize() writes its
// effective K/V (the master moved to the agent's positions by RoPE re-rotation, then the diff rows)
// into scratch blocks just in time; between rounds no dense per-agent copy exists. The master lives
// while any diff refers to it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/kv_rerotate.h"
#include "model/model.h"
#include "share/selective_recompute.h"
#include "util/status.h"

namespace agentkv {

class MasterSegment {
 public:
  // Keeps the segment's K/V where it was computed: slots [slot0, slot0 + n) of `kv` (n < 0: to its
  // end; e.g. a prefill of [BOS][segment] with slot0 = 1), at RoPE positions pos0.. . It shares the
  // blocks `kv` holds; those outside the segment may be holes (KvSequence::drop_blocks).
  MasterSegment(KvSequence kv, int32_t slot0, int32_t pos0, int64_t n = -1)
      : kv_(std::move(kv)), slot0_(slot0), pos0_(pos0), n_(n < 0 ? kv_.n_tokens() - slot0 : n) {
    AGENTKV_CHECK(slot0 >= 0 && slot0 + n_ <= kv_.n_tokens() && kv_.has_kv(slot0, slot0 + n_));
  }
  // The slots [slot0, slot0 + n) of `master` only: a fork that holds the blocks of those slots alone.
  static std::shared_ptr<const MasterSegment> slice(const KvSequence& master, int32_t slot0, int64_t n);

  std::span<const int32_t> tokens() const {
    return std::span<const int32_t>(kv_.tokens()).subspan(size_t(slot0_), size_t(n_));
  }
  int64_t n_tokens() const { return n_; }
  int64_t n_blocks() const { return int64_t(kv_.blocks().size()) - kv_.n_holes(); }
  // The block table it holds (holes: KvSequence::kHole).
  const std::vector<int32_t>& blocks() const { return kv_.blocks(); }
  // What selective_recompute reads.
  SegmentMaster view() const {
    return SegmentMaster{KvSlotRange{SeqBlocks{kv_.blocks().data(), int32_t(kv_.blocks().size())}, slot0_}, pos0_};
  }
  KvManager& manager() const { return kv_.manager(); }

 private:
  KvSequence kv_;
  int32_t slot0_, pos0_;
  int64_t n_;
};

class PackedKv;

class SegmentDiff {
 public:
  // The agent's dense blended copy of the segment sits at `dense` (RoPE positions pos0.. in the
  // agent's context); keeps the K/V of `rows` (segment-relative, ascending, unique: the recomputed
  // tokens) in packed blocks of its own. nullopt when the pool is short.
  static std::optional<SegmentDiff> extract(std::shared_ptr<const MasterSegment> master, const KvSlotRange& dense,
                                            int32_t pos0, std::vector<int32_t> rows);
  // Several diffs of one context (its blended runs) whose rows share one set of packed blocks, so a
  // context with many short runs does not pay a partial block per run. All or nothing.
  struct Spec {
    std::shared_ptr<const MasterSegment> master;
    KvSlotRange dense;
    int32_t pos0 = 0;
    std::vector<int32_t> rows;
  };
  static std::optional<std::vector<SegmentDiff>> extract_packed(KvManager& m, std::vector<Spec> specs);
  // The rows (segment-relative) where `dense` differs from the master re-rotated to positions pos0..,
  // in any layer, K or V: what a diff must hold for materialize() to give `dense` back bit for bit,
  // whatever rewrote the copy after its blend (e.g. the exact prefill of a run's last token when the
  // next run starts right after it). nullopt when the pool cannot hold the scratch re-rotation.
  static std::optional<std::vector<int32_t>> differing_rows(const Model& model, const MasterSegment& master,
                                                            const KvSlotRange& dense, int32_t pos0, ThreadPool& pool);

  // Writes the effective K/V into `dst` (blocks the caller owns alone): the master re-rotated from
  // its positions to the agent's, then the diff rows over it. Byte-identical to the dense copy it
  // replaces, which selective_recompute made the same way (re-rotation, then recompute of the rows).
  Status materialize(const Model& model, const KvSlotRange& dst, ThreadPool& pool) const;

  const std::shared_ptr<const MasterSegment>& master() const { return master_; }
  const std::vector<int32_t>& rows() const { return rows_; }
  int32_t pos0() const { return pos0_; }
  // The packed blocks its rows are in (shared with the other diffs of an extract_packed).
  int64_t n_blocks() const;
  const std::vector<int32_t>& blocks() const;
  const PackedKv* packed_rows() const { return packed_.get(); }

 private:
  SegmentDiff(std::shared_ptr<const MasterSegment> master, int32_t pos0, std::vector<int32_t> rows,
              std::shared_ptr<const PackedKv> packed, int32_t first)
      : master_(std::move(master)), pos0_(pos0), rows_(std::move(rows)), packed_(std::move(packed)), first_(first) {}
  std::shared_ptr<const MasterSegment> master_;
  int32_t pos0_ = 0;
  std::vector<int32_t> rows_;
  std::shared_ptr<const PackedKv> packed_;  // diff row j: packed row first_ + j
  int32_t first_ = 0;
};

// Dense K/V of a run of tokens at arbitrary slots (e.g. an agent's own prompt and answer after a
// segment), packed into blocks of its own; restore() writes it back at any slots. Bitwise copies.
class PackedKv {
 public:
  static std::optional<PackedKv> pack(KvManager& m, const KvSlotRange& src, int32_t n);
  // The rows at `slots` (anywhere), in order.
  static std::optional<PackedKv> pack_rows(KvManager& m, std::span<const PhysicalSlot> slots);
  PackedKv(PackedKv&& o) noexcept;
  PackedKv& operator=(PackedKv&& o) noexcept;
  ~PackedKv();
  void restore(const KvSlotRange& dst) const;
  // Writes packed row i at `dst`.
  void restore_row(int32_t i, PhysicalSlot dst) const;
  int32_t n_tokens() const { return n_; }
  int64_t n_blocks() const { return int64_t(blocks_.size()); }
  const std::vector<int32_t>& blocks() const { return blocks_; }

 private:
  PackedKv(KvManager& m, int32_t n, std::vector<int32_t> blocks) : m_(&m), n_(n), blocks_(std::move(blocks)) {}
  void release();
  KvManager* m_ = nullptr;
  int32_t n_ = 0;
  std::vector<int32_t> blocks_;
};

}  // namespace agentkv
