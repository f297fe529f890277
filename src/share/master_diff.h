// Master–diff storage of a shared segment's KV (TokenDance, arXiv 2604.03143). In an all-gather
// round every agent holds the same segment (last round's messages) at a different position. Its K/V
// is stored once, densely, as a MasterSegment; each agent keeps only a SegmentDiff: the rows where its
// copy differs from the master re-rotated to its positions (selective recompute's rows,
// share/selective_recompute.h), packed into pool blocks in a diff format (kv/kv_diff_codec.h: f16
// rows, bit for bit, or int8 / int4 differences from the re-rotated master with a stated bound), plus
// a reference to the master. Before the agent attends to the segment, materialize() writes its
// effective K/V (the master moved to the agent's positions by RoPE re-rotation, then the diff rows)
// into scratch blocks just in time; between rounds no dense per-agent copy exists. The master lives
// while any diff refers to it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kv/kv_diff_codec.h"
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

// How extract_packed stores a diff's rows. A lossy format encodes each row against the master
// re-rotated to the agent's positions, which needs the model (its RoPE) and a thread pool.
struct DiffPacking {
  DiffFormat format = DiffFormat::kF16;
  const Model* model = nullptr;
  ThreadPool* pool = nullptr;
};

class SegmentDiff {
 public:
  // The agent's dense blended copy of the segment sits at `dense` (RoPE positions pos0.. in the
  // agent's context); keeps the K/V of `rows` (segment-relative, ascending, unique: the rows where
  // `dense` differs from the re-rotated master) in packed blocks of its own. nullopt when the pool is
  // short.
  static std::optional<SegmentDiff> extract(std::shared_ptr<const MasterSegment> master, const KvSlotRange& dense,
                                            int32_t pos0, std::vector<int32_t> rows, const DiffPacking& packing = {});
  // Several diffs of one context (its blended runs) whose rows share one set of packed blocks, so a
  // context with many short runs does not pay a partial block per run. All or nothing.
  // A spec with `verbatim` set takes that diff's rows and records as they are (a run that is already
  // in master–diff form: no dense copy to read, and a lossy record is not encoded twice); its
  // master, pos0 and rows must be the diff's, and its format the packing's.
  struct Spec {
    std::shared_ptr<const MasterSegment> master;
    KvSlotRange dense;
    int32_t pos0 = 0;
    std::vector<int32_t> rows;
    const SegmentDiff* verbatim = nullptr;
  };
  static std::optional<std::vector<SegmentDiff>> extract_packed(KvManager& m, std::vector<Spec> specs,
                                                                const DiffPacking& packing = {});
  // The rows (segment-relative) where `dense` differs from the master re-rotated to positions pos0..,
  // in any layer, K or V: what a diff must hold for materialize() to give `dense` back (bit for bit
  // with a lossless format), whatever rewrote the copy after its blend (e.g. the exact prefill of a
  // run's last token when the next run starts right after it). A row equal to the master's is not
  // among them, recomputed or not. nullopt when the pool cannot hold the scratch re-rotation.
  static std::optional<std::vector<int32_t>> differing_rows(const Model& model, const MasterSegment& master,
                                                            const KvSlotRange& dense, int32_t pos0, ThreadPool& pool);
  // The `share` of the segment's rows (rounded up) whose K/V deviates most from the master re-rotated to
  // positions pos0.., among those that differ at all (ascending): what a diff keeps when the rest may be
  // served from the master instead (an agent's own earlier turn that a later shared block quotes,
  // engine/compact_context.h). A row's deviation is the sum over layers of |dense - base|^2 / |dense|^2 for
  // its K and for its V, so each layer counts alike whatever its scale. share >= 1 gives differing_rows.
  // nullopt when the pool cannot hold the scratch re-rotation.
  static std::optional<std::vector<int32_t>> most_deviating_rows(const Model& model, const MasterSegment& master,
                                                                 const KvSlotRange& dense, int32_t pos0, double share,
                                                                 ThreadPool& pool);

  // Writes the effective K/V into `dst` (blocks the caller owns alone): the master re-rotated from
  // its positions to the agent's, then the diff rows over it. With a lossless format byte-identical
  // to the dense copy it replaces (selective_recompute made it the same way: re-rotation, then
  // recompute of the rows); with a lossy one within the format's bound on every diff row.
  Status materialize(const Model& model, const KvSlotRange& dst, ThreadPool& pool) const;

  const std::shared_ptr<const MasterSegment>& master() const { return master_; }
  const std::vector<int32_t>& rows() const { return rows_; }
  int32_t pos0() const { return pos0_; }
  // The packed blocks its rows are in (shared with the other diffs of an extract_packed).
  int64_t n_blocks() const;
  const std::vector<int32_t>& blocks() const;
  const PackedKv* packed_rows() const { return packed_.get(); }
  // Diff row j's record in the packed blocks (kv/kv_diff_codec.h).
  const uint8_t* row_record(size_t j) const;

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

// A diff that stands for context slots [first, first + diff->master()->n_tokens()) of a context.
using PlacedSegmentDiff = std::pair<int64_t, std::shared_ptr<const SegmentDiff>>;

// K/V rows (one token's K and V in every layer each) packed into blocks of their own as records of a
// diff format (kv/kv_diff_codec.h), as many to a block as fit: f16 copies (a block's worth of tokens
// per block), or lossy differences from base rows (e.g. an agent's own prompt and answer after a
// segment are packed as f16 copies; a diff's rows as differences from the re-rotated master).
class PackedKv {
 public:
  // Dense K/V of a run of tokens, bitwise (f16): restore() writes it back at any slots.
  static std::optional<PackedKv> pack(KvManager& m, const KvSlotRange& src, int32_t n);
  // The rows at `slots` (anywhere), in order. A lossy format encodes each against the row at the same
  // index of `bases`; a lossless one reads no base (bases may be empty).
  static std::optional<PackedKv> pack_rows(KvManager& m, std::span<const PhysicalSlot> slots,
                                           DiffFormat format = DiffFormat::kF16,
                                           std::span<const PhysicalSlot> bases = {});
  // n rows of `format`, not yet written (encode_row writes them).
  static std::optional<PackedKv> allocate(KvManager& m, DiffFormat format, int32_t n);
  PackedKv(PackedKv&& o) noexcept;
  PackedKv& operator=(PackedKv&& o) noexcept;
  ~PackedKv();
  // Encodes the row at `dense` as packed row i (against the row at `base`: lossy formats only).
  void encode_row(int32_t i, PhysicalSlot dense, const PhysicalSlot* base);
  // Writes packed row i as a copy of `record` (one record of this format).
  void copy_record(int32_t i, const uint8_t* record);
  // Lossless formats only: packed rows 0.. written at dst's slots 0.. .
  void restore(const KvSlotRange& dst) const;
  // Writes packed row i at `dst`; a lossy format adds its difference to the base `dst` holds.
  void restore_row(int32_t i, PhysicalSlot dst) const;
  int32_t n_tokens() const { return n_; }
  int64_t n_blocks() const { return int64_t(blocks_.size()); }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  const KvRowCodec& codec() const { return codec_; }
  // Packed row i's record (codec().record_bytes() bytes).
  const uint8_t* record(int32_t i) const;
  // The records' bytes (the blocks hold them, with the unused tail of the last).
  int64_t payload_bytes() const { return int64_t(n_) * int64_t(codec_.record_bytes()); }

 private:
  PackedKv(KvManager& m, KvRowCodec codec, int32_t n, std::vector<int32_t> blocks)
      : m_(&m), codec_(codec), n_(n), blocks_(std::move(blocks)) {}
  uint8_t* record_at(int32_t i) const;
  void release();
  KvManager* m_ = nullptr;
  KvRowCodec codec_;
  int32_t n_ = 0;
  std::vector<int32_t> blocks_;
};

}  // namespace agentkv
