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
  std::vector<Spec> one;
  one.push_back(Spec{std::move(master), dense, pos0, std::move(rows)});
  auto diffs = extract_packed(m, std::move(one));
  if (!diffs) return std::nullopt;
  return std::move(diffs->front());
}

std::optional<std::vector<SegmentDiff>> SegmentDiff::extract_packed(KvManager& m, std::vector<Spec> specs) {
  const int bs = m.block_size();
  std::vector<PhysicalSlot> slots;
  for (const Spec& sp : specs)
    for (size_t j = 0; j < sp.rows.size(); ++j) {
      AGENTKV_CHECK(sp.rows[j] >= 0 && sp.rows[j] < sp.master->n_tokens() && (j == 0 || sp.rows[j] > sp.rows[j - 1]));
      slots.push_back(row_at(sp.dense, sp.rows[j], bs));
    }
  auto packed = PackedKv::pack_rows(m, slots);
  if (!packed) return std::nullopt;
  auto shared = std::make_shared<const PackedKv>(std::move(*packed));
  std::vector<SegmentDiff> out;
  int32_t first = 0;
  for (Spec& sp : specs) {
    const int32_t n = int32_t(sp.rows.size());
    out.push_back(SegmentDiff(std::move(sp.master), sp.pos0, std::move(sp.rows), shared, first));
    first += n;
  }
  return out;
}

std::optional<std::vector<int32_t>> SegmentDiff::differing_rows(const Model& model, const MasterSegment& master,
                                                                const KvSlotRange& dense, int32_t pos0,
                                                                ThreadPool& pool) {
  KvManager& m = master.manager();
  const int bs = m.block_size();
  const int32_t n = int32_t(master.n_tokens());
  std::vector<int32_t> scratch;
  if (!m.pool().allocate_n((int64_t(n) + bs - 1) / bs, scratch)) return std::nullopt;
  const SegmentMaster mv = master.view();
  const Status st = rerotate_kv(model, m.arena(), mv.slots, packed(scratch), n, pos0 - mv.pos0, pool);
  std::vector<int32_t> rows;
  const size_t bytes = size_t(m.arena().kv_dim()) * sizeof(kv_t);
  for (int32_t i = 0; i < n && st.ok(); ++i) {
    const PhysicalSlot a = row_at(packed(scratch), i, bs), b = row_at(dense, i, bs);
    for (int l = 0; l < m.arena().n_layer(); ++l) {
      const PagedKvLayer L = m.arena().layer(l);
      if (std::memcmp(L.k(a.block, a.offset), L.k(b.block, b.offset), bytes) != 0 ||
          std::memcmp(L.v(a.block, a.offset), L.v(b.block, b.offset), bytes) != 0) {
        rows.push_back(i);
        break;
      }
    }
  }
  m.pool().release(scratch);
  if (!st.ok()) return std::nullopt;
  return rows;
}

int64_t SegmentDiff::n_blocks() const { return packed_->n_blocks(); }

const std::vector<int32_t>& SegmentDiff::blocks() const { return packed_->blocks(); }

Status SegmentDiff::materialize(const Model& model, const KvSlotRange& dst, ThreadPool& pool) const {
  const KvArena& arena = master_->manager().arena();
  const SegmentMaster mv = master_->view();
  AGENTKV_TRY(rerotate_kv(model, arena, mv.slots, dst, int32_t(master_->n_tokens()), pos0_ - mv.pos0, pool));
  const int bs = arena.block_size();
  for (size_t j = 0; j < rows_.size(); ++j) packed_->restore_row(first_ + int32_t(j), row_at(dst, rows_[j], bs));
  return {};
}

std::optional<PackedKv> PackedKv::pack(KvManager& m, const KvSlotRange& src, int32_t n) {
  std::vector<PhysicalSlot> slots;
  for (int32_t i = 0; i < n; ++i) slots.push_back(row_at(src, i, m.block_size()));
  return pack_rows(m, slots);
}

std::optional<PackedKv> PackedKv::pack_rows(KvManager& m, std::span<const PhysicalSlot> slots) {
  const int bs = m.block_size();
  const int32_t n = int32_t(slots.size());
  std::vector<int32_t> blocks;
  if (!m.pool().allocate_n((int64_t(n) + bs - 1) / bs, blocks)) return std::nullopt;
  for (int32_t i = 0; i < n; ++i) copy_row(m.arena(), slots[size_t(i)], row_at(packed(blocks), i, bs));
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
  for (int32_t i = 0; i < n_; ++i) restore_row(i, row_at(dst, i, m_->block_size()));
}

void PackedKv::restore_row(int32_t i, PhysicalSlot dst) const {
  AGENTKV_CHECK(i >= 0 && i < n_);
  copy_row(m_->arena(), row_at(packed(blocks_), i, m_->block_size()), dst);
}

}  // namespace agentkv
