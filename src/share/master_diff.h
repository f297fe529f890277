// Master–diff storage of a shared segment's KV (TokenDance, arXiv 2604.03143). In an all-gather
// round every agent holds the same segment (last round's messages) at a different position. Its K/V
// is stored once, densely, as a MasterSegment; each agent keeps only a SegmentDiff: the rows its
// selective recompute changed, packed into pool blocks, plus a reference to the master. Before the
// agent attends to the segment, materialize() writes its effective K/V (the master moved to the
// agent's positions by an exact RoPE re-rotation, then the diff rows) into scratch blocks just in
// time; between rounds no dense per-agent copy exists. The master lives while any diff refers to it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_manager.h"

namespace agentkv {

// Moves one cached K row of one layer (n_head_kv * head_dim floats) from position p to p + delta.
// The model layer provides it (each layer has its own RoPE base and style).
using KRotateFn = std::function<void(int layer, float* k_row, int64_t delta)>;

// Where a run of n tokens' K/V sits: slots [slot0, slot0 + n) of a block table.
struct KvSlots {
  std::span<const int32_t> table;
  int64_t slot0 = 0;
};

class MasterSegment {
 public:
  // Copies the K/V of `tokens`, computed at positions [pos0, pos0 + n) and found at `src`, into
  // blocks of its own. nullopt when the pool is short.
  static std::optional<std::shared_ptr<const MasterSegment>> create(KvManager& m, std::span<const int32_t> tokens,
                                                                    KvSlots src, int64_t pos0);
  ~MasterSegment();
  MasterSegment(const MasterSegment&) = delete;
  MasterSegment& operator=(const MasterSegment&) = delete;

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t n_tokens() const { return int64_t(tokens_.size()); }
  int64_t pos0() const { return pos0_; }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  KvManager& manager() const { return *m_; }

 private:
  MasterSegment(KvManager& m, std::vector<int32_t> tokens, std::vector<int32_t> blocks, int64_t pos0)
      : m_(&m), tokens_(std::move(tokens)), blocks_(std::move(blocks)), pos0_(pos0) {}
  KvManager* m_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> blocks_;  // slot i of the segment: blocks_[i / block_size], offset i % block_size
  int64_t pos0_;
};

class SegmentDiff {
 public:
  // The agent's dense blended copy of the segment sits at `dense` (positions [pos0, pos0 + n));
  // keeps the K/V of `rows` (segment-relative, ascending, unique) — the recomputed tokens — in packed
  // blocks. nullopt when the pool is short.
  static std::optional<SegmentDiff> extract(std::shared_ptr<const MasterSegment> master, KvSlots dense,
                                            int64_t pos0, std::vector<int32_t> rows);
  SegmentDiff(SegmentDiff&& o) noexcept;
  SegmentDiff& operator=(SegmentDiff&& o) noexcept;
  ~SegmentDiff();

  // Writes the effective K/V into `dst` (writable blocks): the master re-rotated from its positions
  // to [pos0, pos0 + n), then the diff rows over it. Byte-identical to the dense copy it replaces
  // when that copy was made the same way (materialize, then recompute of the rows).
  void materialize(KvSlots dst, const KRotateFn& rotate) const;

  const std::shared_ptr<const MasterSegment>& master() const { return master_; }
  const std::vector<int32_t>& rows() const { return rows_; }
  int64_t pos0() const { return pos0_; }
  int64_t n_blocks() const { return int64_t(blocks_.size()); }

 private:
  SegmentDiff(std::shared_ptr<const MasterSegment> master, int64_t pos0, std::vector<int32_t> rows,
              std::vector<int32_t> blocks)
      : master_(std::move(master)), pos0_(pos0), rows_(std::move(rows)), blocks_(std::move(blocks)) {}
  void release();
  std::shared_ptr<const MasterSegment> master_;
  int64_t pos0_ = 0;
  std::vector<int32_t> rows_;
  std::vector<int32_t> blocks_;  // diff row j: blocks_[j / block_size], offset j % block_size
};

// Copies the K/V of n tokens from src to dst, all layers; with a non-zero delta, K is re-rotated by
// it (V does not depend on position).
void copy_kv_rows(const KvArena& arena, KvSlots src, KvSlots dst, int64_t n, int64_t delta, const KRotateFn& rotate);

}  // namespace agentkv
