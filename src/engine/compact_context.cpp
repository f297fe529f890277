#include "engine/compact_context.h"

#include "util/status.h"

namespace agentkv {

namespace {

KvSlotRange range(const KvSequence& s, int64_t slot0) {
  return KvSlotRange{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, int32_t(slot0)};
}

}  // namespace

std::optional<CompactContext> CompactContext::compact(const KvSequence& dense, int64_t seg_begin,
                                                      std::shared_ptr<const MasterSegment> master,
                                                      std::vector<int32_t> rows) {
  const int64_t seg_len = master->n_tokens();
  AGENTKV_CHECK(seg_begin >= 0 && seg_begin + seg_len <= dense.n_tokens());
  KvManager& m = dense.manager();
  // The prefix keeps whole blocks only: a partial block before the segment also holds segment rows.
  const int64_t bs = m.block_size();
  KvSequence prefix = dense.fork();
  prefix.truncate((seg_begin / bs) * bs);
  const int64_t kept = prefix.n_tokens();
  auto gap = PackedKv::pack(m, range(dense, kept), int32_t(seg_begin - kept));
  if (!gap) return std::nullopt;
  auto diff = SegmentDiff::extract(std::move(master), range(dense, seg_begin), int32_t(seg_begin), std::move(rows));
  if (!diff) return std::nullopt;
  const int64_t tail0 = seg_begin + seg_len;
  auto tail = PackedKv::pack(m, range(dense, tail0), int32_t(dense.n_tokens() - tail0));
  if (!tail) return std::nullopt;
  return CompactContext(std::move(prefix), std::move(*gap), std::move(*diff), std::move(*tail), dense.tokens(),
                        seg_begin);
}

std::optional<KvSequence> CompactContext::expand(const Model& model, ThreadPool& pool) const {
  KvSequence s = prefix_.fork();
  const int64_t kept = s.n_tokens();
  if (!s.reserve(n_tokens() - kept)) return std::nullopt;
  gap_.restore(range(s, kept));
  if (!diff_.materialize(model, range(s, seg_begin_), pool).ok()) return std::nullopt;
  tail_.restore(range(s, seg_begin_ + diff_.master()->n_tokens()));
  s.mark_approximate_from(seg_begin_);
  s.commit(std::span<const int32_t>(tokens_).subspan(size_t(kept)));
  return s;
}

int64_t CompactContext::own_blocks() const { return gap_.n_blocks() + diff_.n_blocks() + tail_.n_blocks(); }

}  // namespace agentkv
