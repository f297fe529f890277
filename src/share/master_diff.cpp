// Master–diff storage (share/master_diff.h): masters, diffs in their row format, packed rows.
#include "share/master_diff.h"

#include <algorithm>
#include <cmath>
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

// A master re-rotated to an agent's positions, in scratch blocks of its own for as long as it lives:
// what a diff is found and encoded against. Empty (ok() false) when the pool is short or the rotation fails.
class RerotatedMaster {
 public:
  RerotatedMaster(const Model& model, const MasterSegment& master, int32_t pos0, ThreadPool& pool)
      : m_(master.manager()) {
    const int bs = m_.block_size();
    const int32_t n = int32_t(master.n_tokens());
    if (!m_.pool().allocate_n((int64_t(n) + bs - 1) / bs, blocks_)) return;
    const SegmentMaster mv = master.view();
    ok_ = rerotate_kv(model, m_.arena(), mv.slots, slots(), n, pos0 - mv.pos0, pool).ok();
  }
  ~RerotatedMaster() { m_.pool().release(blocks_); }
  RerotatedMaster(const RerotatedMaster&) = delete;
  RerotatedMaster& operator=(const RerotatedMaster&) = delete;
  bool ok() const { return ok_; }
  KvSlotRange slots() const { return packed(blocks_); }

 private:
  KvManager& m_;
  std::vector<int32_t> blocks_;
  bool ok_ = false;
};

}  // namespace

std::shared_ptr<const MasterSegment> MasterSegment::slice(const KvSequence& master, int32_t slot0, int64_t n) {
  KvSequence kv = master.fork();
  kv.truncate(slot0 + n);
  kv.drop_blocks(0, slot0 / kv.manager().block_size());
  return std::make_shared<const MasterSegment>(std::move(kv), slot0, slot0, n);
}

std::optional<SegmentDiff> SegmentDiff::extract(std::shared_ptr<const MasterSegment> master, const KvSlotRange& dense,
                                                int32_t pos0, std::vector<int32_t> rows, const DiffPacking& packing) {
  KvManager& m = master->manager();
  std::vector<Spec> one;
  one.push_back(Spec{std::move(master), dense, pos0, std::move(rows)});
  auto diffs = extract_packed(m, std::move(one), packing);
  if (!diffs) return std::nullopt;
  return std::move(diffs->front());
}

std::optional<std::vector<SegmentDiff>> SegmentDiff::extract_packed(KvManager& m, std::vector<Spec> specs,
                                                                    const DiffPacking& packing) {
  const int bs = m.block_size();
  const bool lossless = diff_format_lossless(packing.format);
  AGENTKV_CHECK(lossless || (packing.model && packing.pool));
  int32_t total = 0;
  for (const Spec& sp : specs) {
    for (size_t j = 0; j < sp.rows.size(); ++j)
      AGENTKV_CHECK(sp.rows[j] >= 0 && sp.rows[j] < sp.master->n_tokens() && (j == 0 || sp.rows[j] > sp.rows[j - 1]));
    total += int32_t(sp.rows.size());
  }
  auto packed = PackedKv::allocate(m, packing.format, total);
  if (!packed) return std::nullopt;
  // Spec by spec, so a lossy format holds one scratch re-rotation at a time.
  int32_t i = 0;
  for (const Spec& sp : specs) {
    if (sp.rows.empty()) continue;
    if (sp.verbatim) {
      AGENTKV_CHECK(sp.verbatim->packed_rows()->codec().format() == packing.format &&
                    sp.verbatim->rows() == sp.rows && sp.verbatim->master() == sp.master);
      for (size_t j = 0; j < sp.rows.size(); ++j) packed->copy_record(i++, sp.verbatim->row_record(j));
      continue;
    }
    std::optional<RerotatedMaster> base;
    if (!lossless) {
      base.emplace(*packing.model, *sp.master, sp.pos0, *packing.pool);
      if (!base->ok()) return std::nullopt;
    }
    for (int32_t r : sp.rows) {
      const PhysicalSlot b = base ? row_at(base->slots(), r, bs) : PhysicalSlot{};
      packed->encode_row(i++, row_at(sp.dense, r, bs), base ? &b : nullptr);
    }
  }
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
  const RerotatedMaster base(model, master, pos0, pool);
  if (!base.ok()) return std::nullopt;
  std::vector<int32_t> rows;
  const size_t bytes = size_t(m.arena().kv_dim()) * sizeof(kv_t);
  for (int32_t i = 0; i < int32_t(master.n_tokens()); ++i) {
    const PhysicalSlot a = row_at(base.slots(), i, bs), b = row_at(dense, i, bs);
    for (int l = 0; l < m.arena().n_layer(); ++l) {
      const PagedKvLayer L = m.arena().layer(l);
      if (std::memcmp(L.k(a.block, a.offset), L.k(b.block, b.offset), bytes) != 0 ||
          std::memcmp(L.v(a.block, a.offset), L.v(b.block, b.offset), bytes) != 0) {
        rows.push_back(i);
        break;
      }
    }
  }
  return rows;
}

std::optional<std::vector<int32_t>> SegmentDiff::most_deviating_rows(const Model& model, const MasterSegment& master,
                                                                     const KvSlotRange& dense, int32_t pos0,
                                                                     double share, ThreadPool& pool) {
  if (!(share < 1)) return differing_rows(model, master, dense, pos0, pool);
  KvManager& m = master.manager();
  const int bs = m.block_size();
  const RerotatedMaster base(model, master, pos0, pool);
  if (!base.ok()) return std::nullopt;
  const int n_layer = m.arena().n_layer(), kv_dim = m.arena().kv_dim();
  std::vector<float> a(static_cast<size_t>(kv_dim)), b(static_cast<size_t>(kv_dim));
  // |x - y|^2 / |x|^2 (x: the dense row), 0 when they are equal.
  auto relative = [&](const kv_t* x, const kv_t* y) {
    kv_load(a.data(), x, kv_dim);
    kv_load(b.data(), y, kv_dim);
    double d = 0, norm = 0;
    for (int j = 0; j < kv_dim; ++j) {
      d += double(a[size_t(j)] - b[size_t(j)]) * double(a[size_t(j)] - b[size_t(j)]);
      norm += double(a[size_t(j)]) * double(a[size_t(j)]);
    }
    return d == 0 ? 0.0 : d / std::max(norm, 1e-30);
  };
  std::vector<std::pair<double, int32_t>> deviation;  // the rows that differ
  for (int32_t i = 0; i < int32_t(master.n_tokens()); ++i) {
    const PhysicalSlot x = row_at(dense, i, bs), y = row_at(base.slots(), i, bs);
    double dev = 0;
    for (int l = 0; l < n_layer; ++l) {
      const PagedKvLayer L = m.arena().layer(l);
      dev += relative(L.k(x.block, x.offset), L.k(y.block, y.offset)) +
             relative(L.v(x.block, x.offset), L.v(y.block, y.offset));
    }
    if (dev > 0) deviation.emplace_back(dev, i);
  }
  const size_t keep = std::min(deviation.size(), size_t(std::ceil(std::max(share, 0.0) * double(master.n_tokens()))));
  // The largest deviations first; ties by row, so the choice does not depend on the sort.
  std::partial_sort(deviation.begin(), deviation.begin() + int64_t(keep), deviation.end(),
                    [](const auto& p, const auto& q) { return p.first > q.first || (p.first == q.first && p.second < q.second); });
  std::vector<int32_t> rows;
  for (size_t j = 0; j < keep; ++j) rows.push_back(deviation[j].second);
  std::sort(rows.begin(), rows.end());
  return rows;
}

int64_t SegmentDiff::n_blocks() const { return packed_->n_blocks(); }

const std::vector<int32_t>& SegmentDiff::blocks() const { return packed_->blocks(); }

const uint8_t* SegmentDiff::row_record(size_t j) const {
  AGENTKV_CHECK(j < rows_.size());
  return packed_->record(first_ + int32_t(j));
}

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

std::optional<PackedKv> PackedKv::pack_rows(KvManager& m, std::span<const PhysicalSlot> slots, DiffFormat format,
                                            std::span<const PhysicalSlot> bases) {
  AGENTKV_CHECK(diff_format_lossless(format) || bases.size() == slots.size());
  auto p = allocate(m, format, int32_t(slots.size()));
  if (!p) return std::nullopt;
  for (size_t i = 0; i < slots.size(); ++i) p->encode_row(int32_t(i), slots[i], bases.empty() ? nullptr : &bases[i]);
  return p;
}

std::optional<PackedKv> PackedKv::allocate(KvManager& m, DiffFormat format, int32_t n) {
  const KvArena& a = m.arena();
  const KvRowCodec codec(format, a.n_layer(), a.kv_dim(), a.head_dim());
  const int64_t per_block = a.bytes_per_block() / int64_t(codec.record_bytes());
  AGENTKV_CHECK(n >= 0 && per_block > 0);
  std::vector<int32_t> blocks;
  if (!m.pool().allocate_n((int64_t(n) + per_block - 1) / per_block, blocks)) return std::nullopt;
  return PackedKv(m, codec, n, std::move(blocks));
}

PackedKv::PackedKv(PackedKv&& o) noexcept : m_(o.m_), codec_(o.codec_), n_(o.n_), blocks_(std::move(o.blocks_)) {
  o.blocks_.clear();
}

PackedKv& PackedKv::operator=(PackedKv&& o) noexcept {
  if (this == &o) return *this;
  release();
  m_ = o.m_;
  codec_ = o.codec_;
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

uint8_t* PackedKv::record_at(int32_t i) const {
  AGENTKV_CHECK(i >= 0 && i < n_);
  const KvArena& a = m_->arena();
  const int64_t per_block = a.bytes_per_block() / int64_t(codec_.record_bytes());
  // A record never straddles two blocks: the tail of a block that fits no whole record stays unused.
  return reinterpret_cast<uint8_t*>(a.block_data(blocks_[size_t(i / per_block)])) +
         (i % per_block) * int64_t(codec_.record_bytes());
}

const uint8_t* PackedKv::record(int32_t i) const { return record_at(i); }

void PackedKv::copy_record(int32_t i, const uint8_t* record) {
  std::memcpy(record_at(i), record, codec_.record_bytes());
}

void PackedKv::encode_row(int32_t i, PhysicalSlot dense, const PhysicalSlot* base) {
  AGENTKV_CHECK(base || diff_format_lossless(codec_.format()));
  uint8_t* rec = record_at(i);
  const size_t vb = codec_.vector_bytes();
  for (int l = 0; l < codec_.n_layer(); ++l) {
    const PagedKvLayer L = m_->arena().layer(l);
    codec_.encode(L.k(dense.block, dense.offset), base ? L.k(base->block, base->offset) : nullptr, rec + 2 * l * vb);
    codec_.encode(L.v(dense.block, dense.offset), base ? L.v(base->block, base->offset) : nullptr, rec + (2 * l + 1) * vb);
  }
}

void PackedKv::restore(const KvSlotRange& dst) const {
  AGENTKV_CHECK(diff_format_lossless(codec_.format()));
  for (int32_t i = 0; i < n_; ++i) restore_row(i, row_at(dst, i, m_->block_size()));
}

void PackedKv::restore_row(int32_t i, PhysicalSlot dst) const {
  const uint8_t* rec = record_at(i);
  const size_t vb = codec_.vector_bytes();
  for (int l = 0; l < codec_.n_layer(); ++l) {
    const PagedKvLayer L = m_->arena().layer(l);
    codec_.decode(rec + 2 * l * vb, L.k(dst.block, dst.offset));
    codec_.decode(rec + (2 * l + 1) * vb, L.v(dst.block, dst.offset));
  }
}

}  // namespace agentkv
