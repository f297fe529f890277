#include "share/master_diff.h"

#include <cstring>

#include "util/status.h"

namespace agentkv {

namespace {

struct RowRef {
  int32_t block;
  int offset;
};

RowRef row_at(KvSlots s, int64_t i, int block_size) {
  const int64_t slot = s.slot0 + i;
  AGENTKV_CHECK(slot >= 0 && slot / block_size < int64_t(s.table.size()));
  return {s.table[size_t(slot / block_size)], int(slot % block_size)};
}

// One token's K and V rows in every layer, copied bitwise.
void copy_row(const KvArena& arena, RowRef from, RowRef to) {
  const size_t bytes = size_t(arena.kv_dim()) * sizeof(kv_t);
  for (int l = 0; l < arena.n_layer(); ++l) {
    const PagedKvLayer L = arena.layer(l);
    std::memcpy(L.k(to.block, to.offset), L.k(from.block, from.offset), bytes);
    std::memcpy(L.v(to.block, to.offset), L.v(from.block, from.offset), bytes);
  }
}

}  // namespace

void copy_kv_rows(const KvArena& arena, KvSlots src, KvSlots dst, int64_t n, int64_t delta, const KRotateFn& rotate) {
  const int bs = arena.block_size();
  const int dim = arena.kv_dim();
  std::vector<float> row(size_t(dim), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const RowRef from = row_at(src, i, bs);
    const RowRef to = row_at(dst, i, bs);
    copy_row(arena, from, to);
    if (delta == 0) continue;
    for (int l = 0; l < arena.n_layer(); ++l) {
      const PagedKvLayer L = arena.layer(l);
      kv_t* k = L.k(to.block, to.offset);
      kv_load(row.data(), k, dim);
      rotate(l, row.data(), delta);
      kv_store(k, row.data(), dim);
    }
  }
}

std::optional<std::shared_ptr<const MasterSegment>> MasterSegment::create(KvManager& m, std::span<const int32_t> tokens,
                                                                          KvSlots src, int64_t pos0) {
  const int64_t n = int64_t(tokens.size());
  const int64_t bs = m.block_size();
  std::vector<int32_t> blocks;
  if (!m.pool().allocate_n((n + bs - 1) / bs, blocks)) return std::nullopt;
  copy_kv_rows(m.arena(), src, KvSlots{blocks, 0}, n, 0, nullptr);
  return std::shared_ptr<const MasterSegment>(
      new MasterSegment(m, std::vector<int32_t>(tokens.begin(), tokens.end()), std::move(blocks), pos0));
}

MasterSegment::~MasterSegment() { m_->pool().release(blocks_); }

std::optional<SegmentDiff> SegmentDiff::extract(std::shared_ptr<const MasterSegment> master, KvSlots dense,
                                                int64_t pos0, std::vector<int32_t> rows) {
  KvManager& m = master->manager();
  const int64_t bs = m.block_size();
  for (size_t j = 0; j < rows.size(); ++j)
    AGENTKV_CHECK(rows[j] >= 0 && rows[j] < master->n_tokens() && (j == 0 || rows[j] > rows[j - 1]));
  std::vector<int32_t> blocks;
  if (!m.pool().allocate_n((int64_t(rows.size()) + bs - 1) / bs, blocks)) return std::nullopt;
  for (size_t j = 0; j < rows.size(); ++j)
    copy_row(m.arena(), row_at(dense, rows[j], int(bs)), row_at(KvSlots{blocks, 0}, int64_t(j), int(bs)));
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

void SegmentDiff::materialize(KvSlots dst, const KRotateFn& rotate) const {
  const KvArena& arena = master_->manager().arena();
  const int bs = arena.block_size();
  copy_kv_rows(arena, KvSlots{master_->blocks(), 0}, dst, master_->n_tokens(), pos0_ - master_->pos0(), rotate);
  for (size_t j = 0; j < rows_.size(); ++j)
    copy_row(arena, row_at(KvSlots{blocks_, 0}, int64_t(j), bs), row_at(dst, rows_[j], bs));
}

}  // namespace agentkv
