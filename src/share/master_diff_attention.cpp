// Attention's view of a master–diff context (share/master_diff_attention.h).
#include "share/master_diff_attention.h"

#include <algorithm>
#include <cstring>

#include "util/status.h"

namespace agentkv {

MasterDiffAttention::MasterDiffAttention(const Model& model, const KvArena& arena, SeqBlocks context,
                                         std::vector<Placed> diffs)
    : model_(model), arena_(arena), context_(context) {
  int64_t end = 0;
  for (const Placed& p : diffs) {
    AGENTKV_CHECK(p.diff && p.begin >= end);
    const SegmentMaster mv = p.diff->master()->view();
    DiffState d;
    d.begin = p.begin;
    d.diff = p.diff;
    d.master_slot0 = mv.slots.slot0;
    d.delta = int64_t(p.diff->pos0()) - mv.pos0;
    for (int32_t r : p.diff->rows()) d.master_slots.push_back(int32_t(d.master_slot0 + r));
    end = p.begin + p.diff->master()->n_tokens();
    diffs_.push_back(std::move(d));
  }
}

MasterDiffAttention MasterDiffAttention::of(
    const Model& model, const KvSequence& kept,
    const std::vector<std::pair<int64_t, std::shared_ptr<const SegmentDiff>>>& diffs) {
  std::vector<Placed> placed;
  for (const auto& [begin, diff] : diffs) placed.push_back(Placed{begin, diff.get()});
  return MasterDiffAttention(model, kept.manager().arena(), SeqBlocks{kept.blocks().data(), int32_t(kept.blocks().size())},
                             std::move(placed));
}

int64_t MasterDiffAttention::n_diff_rows() const {
  int64_t n = 0;
  for (const DiffState& d : diffs_) n += int64_t(d.master_slots.size());
  return n;
}

void MasterDiffAttention::prepare_layer(int il, int64_t lo) {
  const PagedKvLayer l = arena_.layer(il);
  const int kvd = arena_.kv_dim(), bs = arena_.block_size();
  const Rope& rope = model_.layer_rope(il);
  for (DiffState& d : diffs_) {
    const KvRowCodec& codec = d.diff->packed_rows()->codec();
    // The rows at context slots >= lo: master slot >= master_slot0 + (lo - begin).
    const int64_t first_master = d.master_slot0 + std::max<int64_t>(0, lo - d.begin);
    d.row0 = size_t(std::lower_bound(d.master_slots.begin(), d.master_slots.end(), first_master) - d.master_slots.begin());
    const size_t vb = codec.vector_bytes(), n = d.master_slots.size() - d.row0;
    const int32_t* mtable = d.diff->master()->blocks().data();
    const int32_t* slots = d.master_slots.data() + d.row0;
    d.rows.resize(n * 2 * size_t(kvd));
    if (!diff_format_lossless(codec.format())) {
      // The base a lossy row was encoded against: its master row re-rotated as materialize() does it
      // (model/kv_rerotate.h: load, shift, round to f16), all rows in one shift (one delta: the
      // angles are computed once), then V as is.
      base_.resize(n * size_t(kvd));
      for (size_t j = 0; j < n; ++j) {
        const int32_t s = slots[j];
        kv_load(base_.data() + j * size_t(kvd), l.k(mtable[s / bs], s % bs), kvd);
        std::memcpy(d.rows.data() + (2 * j + 1) * size_t(kvd), l.v(mtable[s / bs], s % bs), size_t(kvd) * sizeof(kv_t));
      }
      if (d.delta != 0 && n > 0) rope.shift(base_.data(), int(n) * model_.config().n_head_kv, d.delta);
      for (size_t j = 0; j < n; ++j) kv_store(d.rows.data() + 2 * j * size_t(kvd), base_.data() + j * size_t(kvd), kvd);
    }
    for (size_t j = 0; j < n; ++j) {
      kv_t* k = d.rows.data() + 2 * j * size_t(kvd);
      const uint8_t* rec = d.diff->row_record(d.row0 + j);
      codec.decode(rec + size_t(2 * il) * vb, k);
      codec.decode(rec + size_t(2 * il + 1) * vb, k + kvd);
    }
  }
  layer_ = il;
  lo_ = lo;
}

void MasterDiffAttention::spans(SeqBlocks table, int64_t lo, int64_t hi, std::vector<AttentionSpan>& out) const {
  AGENTKV_CHECK(layer_ >= 0 && lo >= lo_ && lo <= hi + 1);
  const int64_t stride = 2 * int64_t(arena_.kv_dim());
  int64_t c = lo;
  for (const DiffState& d : diffs_) {
    const int64_t e = d.begin + d.diff->master()->n_tokens();
    if (e <= c) continue;
    if (d.begin > hi) break;
    if (c < d.begin) out.push_back(AttentionSpan{table.table, c, d.begin - c});
    c = std::max(c, d.begin);
    const int64_t stop = std::min(e, hi + 1);
    AttentionSpan s{d.diff->master()->blocks().data(), d.master_slot0 + (c - d.begin), stop - c};
    s.rope = &model_.layer_rope(layer_);
    s.rope_delta = d.delta;
    const auto first = std::lower_bound(d.master_slots.begin(), d.master_slots.end(), s.lo);
    const auto last = std::lower_bound(first, d.master_slots.end(), s.lo + s.n);
    const int64_t skip = first - d.master_slots.begin();
    s.n_overrides = last - first;
    if (s.n_overrides > 0) {  // a diff may hold no rows at all (nothing differed from the master)
      AGENTKV_CHECK(skip >= int64_t(d.row0));  // lo >= lo_: every row asked for was decoded
      s.override_slots = d.master_slots.data() + skip;
      s.override_k = d.rows.data() + (skip - int64_t(d.row0)) * stride;
      s.override_v = s.override_k + arena_.kv_dim();
      s.override_stride = stride;
    }
    out.push_back(s);
    c = stop;
  }
  if (c <= hi) out.push_back(AttentionSpan{table.table, c, hi + 1 - c});
}

}  // namespace agentkv
