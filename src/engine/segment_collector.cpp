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
  for (uint64_t h : prefixes) {
    ps.push_back(engine.retained(h));
    if (!ps.back()) return make_error(ErrorCode::kInternal, "KV collector: unknown prefix snapshot " + std::to_string(h));
  }
  auto copies = collect_segment_copies(*engine.model().model, *ms, master_start, segment, ps, options, engine.pool());
  if (!copies.ok()) return std::move(copies).take_error();
  std::vector<CollectedCopy> out(copies->size());
  for (size_t k = 0; k < copies->size(); ++k) {
    out[k].recomputed_slots = std::move((*copies)[k].recomputed_slots);
    out[k].handle = engine.adopt_retained(std::move((*copies)[k].seq));
  }
  return out;
}

}  // namespace agentkv
