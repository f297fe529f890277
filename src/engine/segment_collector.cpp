#include "engine/segment_collector.h"

#include <string>

#include "share/kv_collector.h"

namespace agentkv {

Result<std::vector<CollectedCopy>> collect_shared_segment(Engine& engine, uint64_t master, int32_t master_start,
                                                          std::span<const int32_t> segment,
                                                          std::span<const uint64_t> prefixes,
                                                          const RecomputeOptions& options) {
  const KvSequence* ms = engine.retained(master);
  if (!ms) return make_error(ErrorCode::kInternal, "KV collector: unknown master snapshot " + std::to_string(master));
  std::vector<const KvSequence*> ps;
  // A compact prefix (resumed in attention, EngineOptions::resume_in_attention) is read through its
  // diffs, and its copy stays compact.
  std::vector<std::shared_ptr<const CompactContext>> compact;
  std::vector<std::vector<PlacedSegmentDiff>> diffs(prefixes.size());
  for (size_t k = 0; k < prefixes.size(); ++k) {
    const uint64_t h = prefixes[k];
    ps.push_back(engine.retained(h));
    if (!ps.back()) {
      compact.push_back(engine.compact_context(h));
      if (!compact.back())
        return make_error(ErrorCode::kInternal, "KV collector: unknown prefix snapshot " + std::to_string(h));
      ps.back() = compact.back()->kept().get();
      diffs[k] = compact.back()->diffs();
    }
  }
  auto copies = collect_segment_copies(*engine.model().model, *ms, master_start, segment, ps, options, engine.pool(),
                                       compact.empty() ? std::span<const std::vector<PlacedSegmentDiff>>{}
                                                       : std::span<const std::vector<PlacedSegmentDiff>>(diffs));
  if (!copies.ok()) return std::move(copies).take_error();
  std::vector<CollectedCopy> out(copies->size());
  for (size_t k = 0; k < copies->size(); ++k) {
    BlendedCopy& c = (*copies)[k];
    out[k].recomputed_slots = std::move(c.recomputed_slots);
    out[k].handle = c.diffs.empty() ? engine.adopt_retained(std::move(c.seq))
                                    : engine.adopt_compact(std::move(c.seq), std::move(c.diffs));
  }
  return out;
}

}  // namespace agentkv
