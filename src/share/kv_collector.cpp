#include "share/kv_collector.h"

#include <memory>

#include "share/master_diff_attention.h"

namespace agentkv {

Result<std::vector<BlendedCopy>> collect_segment_copies(const Model& model, const KvSequence& master,
                                                        int32_t master_start, std::span<const int32_t> segment,
                                                        std::span<const KvSequence* const> prefixes,
                                                        const RecomputeOptions& options, ThreadPool& pool,
                                                        std::span<const std::vector<PlacedSegmentDiff>> prefix_diffs) {
  if (master_start < 0 || master.n_tokens() < int64_t(master_start) + int64_t(segment.size()))
    return make_error("KV collector: the master does not hold the segment");
  if (!prefix_diffs.empty() && prefix_diffs.size() != prefixes.size())
    return make_error(ErrorCode::kInternal, "KV collector: prefix diffs are not one per prefix");
  std::vector<BlendedCopy> out;
  out.reserve(prefixes.size());
  for (size_t k = 0; k < prefixes.size(); ++k) {
    KvSequence s = prefixes[k]->fork();
    if (!s.reserve(int64_t(segment.size())))
      return make_error(ErrorCode::kResourceExhausted,
                        "KV collector: the KV budget cannot hold the round's blended segments (raise --kv-mem)");
    out.push_back(BlendedCopy{std::move(s), {}, prefix_diffs.empty() ? std::vector<PlacedSegmentDiff>{} : prefix_diffs[k]});
  }
  if (out.empty()) return out;
  std::vector<AgentSegment> segs;
  std::vector<std::unique_ptr<MasterDiffAttention>> views(out.size());
  for (size_t k = 0; k < out.size(); ++k) {
    BlendedCopy& c = out[k];
    const int32_t p = int32_t(c.seq.n_tokens());
    segs.push_back(AgentSegment{SeqBlocks{c.seq.blocks().data(), int32_t(c.seq.blocks().size())}, p, p});
    if (!c.diffs.empty()) {
      views[k] = std::make_unique<MasterDiffAttention>(MasterDiffAttention::of(model, c.seq, c.diffs));
      segs.back().context = views[k].get();
    }
  }
  const SegmentMaster view{
      KvSlotRange{SeqBlocks{master.blocks().data(), int32_t(master.blocks().size())}, master_start}, master_start};
  auto diffs = selective_recompute(model, master.manager().arena(), view, segment, segs, options, pool);
  if (!diffs.ok()) return std::move(diffs).take_error();
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].seq.mark_approximate_from(out[k].seq.n_tokens());
    out[k].seq.commit(segment);
    out[k].recomputed_slots = std::move((*diffs)[k].recomputed_slots);
  }
  return out;
}

}  // namespace agentkv
