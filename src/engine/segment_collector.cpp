#include "engine/segment_collector.h"

#include <string>

namespace agentkv {

Result<std::vector<CollectedCopy>> collect_shared_segment(Engine& engine, uint64_t master, int32_t master_start,
                                                          std::span<const int32_t> segment,
                                                          std::span<const uint64_t> prefixes,
                                                          const RecomputeOptions& options) {
  const KvSequence* ms = engine.retained(master);
  if (!ms) return make_error("KV collector: unknown master snapshot " + std::to_string(master));
  if (master_start < 0 || ms->n_tokens() < int64_t(master_start) + int64_t(segment.size()))
    return make_error("KV collector: the master snapshot does not hold the segment");
  std::vector<KvSequence> blended;
  std::vector<AgentSegment> segs;
  blended.reserve(prefixes.size());
  for (uint64_t h : prefixes) {
    const KvSequence* ps = engine.retained(h);
    if (!ps) return make_error("KV collector: unknown prefix snapshot " + std::to_string(h));
    KvSequence s = ps->fork();
    if (!s.reserve(int64_t(segment.size())))
      return make_error(ErrorCode::kResourceExhausted, "KV collector: the KV budget cannot hold the round's blended segments (raise --kv-mem)");
    blended.push_back(std::move(s));
  }
  for (KvSequence& s : blended) {
    const int32_t p = int32_t(s.n_tokens());
    segs.push_back(AgentSegment{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, p, p});
  }
  const SegmentMaster view{KvSlotRange{SeqBlocks{ms->blocks().data(), int32_t(ms->blocks().size())}, master_start},
                           master_start};
  std::vector<AgentRecompute> diffs;
  if (!blended.empty()) {
    auto res = selective_recompute(*engine.model().model, engine.kv().arena(), view, segment, segs, options,
                                   engine.pool());
    if (!res.ok()) return std::move(res).take_error();
    diffs = std::move(*res);
  }
  std::vector<CollectedCopy> out(blended.size());
  for (size_t k = 0; k < blended.size(); ++k) {
    blended[k].mark_approximate_from(blended[k].n_tokens());
    blended[k].commit(segment);
    out[k].recomputed_slots = std::move(diffs[k].recomputed_slots);
    out[k].handle = engine.adopt_retained(std::move(blended[k]));
  }
  return out;
}

}  // namespace agentkv
