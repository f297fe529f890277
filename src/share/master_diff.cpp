#include "share/master_diff.h"

#include <cstring>

#include "util/status.h"

namespace agentkv {

namespace {

PhysicalSlot row_at(const KvSlotRange& s, int64_t i, int block_size) {
  const int64_t slot = s.slot0 + i;
  AGENTKV_CHECK(slot >= 0 && slot / block_size < s.blocks.n_blocks);
  return physical_slot(s, i, block_size);
}

KvSlotRange packed(const std::vector<int32_t>& blocks) {
  return KvSlotRange{SeqBlocks{blocks.data(), int32_t(blocks.size())}, 0};
}

// One token's K and V rows in every layer, copied bitwise.
void copy_row(const KvArena& arena, PhysicalSlot from, PhysicalSlot to) {
  const size_t bytes = size_t(arena.kv_dim()) * sizeof(kv_t);
  for (int l = 0; l < arena.n_layer(); ++l) {
    const PagedKvLayer L = arena.layer(l);
    std::memcpy(L.k(to.block, to.offset), L.k(from.block, from.offset), bytes);
    std::memcpy(L.v(to.block, to.offset), L.v(from.block, from.offset), bytes);
  }
}

}  // namespace

std::shared_ptr<const MasterSegment> MasterSegment::slice(const KvSequence& master, int32_t slot0, int64_t n) {
  KvSequence kv = master.fork();
  kv.truncate(slot0 + n);
  kv.drop_blocks(0, slot0 / kv.manager().block_size());
  return std::make_shared<const MasterSegment>(std::move(kv), slot0, slot0, n);
}

std::optional<SegmentDiff> SegmentDiff::extract(std::shared_ptr<const MasterSegment> master, const KvSlotRange& dense,
                                                int32_t pos0, std::vector<int32_t> rows) {
  KvManager& m = master->manager();
  const int bs = m.block_size();
  for (size_t j = 0; j < rows.size(); ++j)
    AGENTKV_CHECK(rows[j] >= 0 && rows[j] < master->n_tokens() && (j == 0 || rows[j] > rows[j - 1]));
  std::vector<int32_t> blocks;
  if (!m.pool().allocate_n((int64_t(rows.size()) + bs - 1) / bs, blocks)) return std::nullopt;
  for (size_t j = 0; j < rows.size(); ++j)
    copy_row(m.arena(), row_at(dense, rows[j], bs), row_at(packed(blocks), int64_t(j), bs));
  return SegmentDiff(std::move(master), pos0, std::move(rows), std::move(blocks));
}

SegmentDiff::SegmentDiff(SegmentDiff&& o) noexcept
    : master_(std::move(o.master_)), pos0_(o.pos0_), rows_(std::move(o.rows_)), blocks_(std::move(o.blocks_)) {
  o.blocks_.clear();
}

SegmentDiff& SegmentDiff::operator=(SegmentDiff&& o) noexcept {
  if (this == &o) return *this;
  release();
  master_ = std::move(o.master_);
  pos0_ = o.pos0_;
  rows_ = std::move(o.rows_);
  blocks_ = std::move(o.blocks_);
  o.blocks_.clear();
  return *this;
}

SegmentDiff::~SegmentDiff() { release(); }

void SegmentDiff::release() {
  if (master_ && !blocks_.empty()) master_->manager().pool().release(blocks_);
  blocks_.clear();
  master_.reset();  // the last diff of a master frees it
}

Status SegmentDiff::materialize(const Model& model, const KvSlotRange& dst, ThreadPool& pool) const {
  const KvArena& arena = master_->manager().arena();
  const SegmentMaster mv = master_->view();
  AGENTKV_TRY(rerotate_kv(model, arena, mv.slots, dst, int32_t(master_->n_tokens()), pos0_ - mv.pos0, pool));
  const int bs = arena.block_size();
  for (size_t j = 0; j < rows_.size(); ++j) copy_row(arena, row_at(packed(blocks_), int64_t(j), bs), row_at(dst, rows_[j], bs));
  return {};
}

std::optional<PackedKv> PackedKv::pack(KvManager& m, const KvSlotRange& src, int32_t n) {
  const int bs = m.block_size();
  std::vector<int32_t> blocks;
  if (!m.pool().allocate_n((int64_t(n) + bs - 1) / bs, blocks)) return std::nullopt;
  for (int32_t i = 0; i < n; ++i) copy_row(m.arena(), row_at(src, i, bs), row_at(packed(blocks), i, bs));
  return PackedKv(m, n, std::move(blocks));
}

PackedKv::PackedKv(PackedKv&& o) noexcept : m_(o.m_), n_(o.n_), blocks_(std::move(o.blocks_)) { o.blocks_.clear(); }

PackedKv& PackedKv::operator=(PackedKv&& o) noexcept {
  if (this == &o) return *this;
  release();
  m_ = o.m_;
  n_ = o.n_;
  blocks_ = std::move(o.blocks_);
  o.blocks_.clear();
  return *this;
}

PackedKv::~PackedKv() { release(); }

void PackedKv::release() {
  if (m_ && !blocks_.empty()) m_->pool().release(blocks_);
  blocks_.clear();
}

void PackedKv::restore(const KvSlotRange& dst) const {
  const int bs = m_->block_size();
  for (int32_t i = 0; i < n_; ++i) copy_row(m_->arena(), row_at(packed(blocks_), i, bs), row_at(dst, i, bs));
}

}  // namespace agentkv
