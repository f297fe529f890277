// Storing and resuming chat contexts (engine/chat_contexts.h).
#include "engine/chat_contexts.h"

#include <algorithm>

namespace agentkv {

std::optional<KvSequence> resume_stored_context(Engine& e, const SegmentStore::PrefixHit& hit) {
  const auto compact = std::dynamic_pointer_cast<const CompactContext>(hit.detached);
  if (!compact) return hit.context->fork();
  while (e.kv().pool().num_free() < compact->n_dropped() && e.segments().evict_lru()) {
  }
  return compact->expand(*e.model().model, e.pool());
}

void store_chat_context(Engine& e, std::shared_ptr<const KvSequence> ctx,
                        std::span<const std::pair<int64_t, int64_t>> segments, const std::vector<BlendedRun>& runs,
                        const SegmentStore::PrefixHit& resumed, int64_t resumed_tokens) {
  // The whole blocks of its blended runs, those it resumed included, serve no master: compact or not.
  SegmentStore::Ranges blended;
  if (!e.chat_original_masters()) return e.segments().add(std::move(ctx), segments);
  for (const auto& r : resumed.blended)
    if (r.second <= resumed_tokens) blended.push_back(r);
  const int bs = e.kv().block_size();
  for (const BlendedRun& r : runs)
    if (const auto [first, last] = droppable_blocks(r.begin, r.n, bs); last > first) blended.emplace_back(first * bs, last * bs);
  std::sort(blended.begin(), blended.end());
  if (e.chat_compact() && !blended.empty()) {
    std::vector<CompactContext::PlacedDiff> inherited;
    if (const auto from = std::dynamic_pointer_cast<const CompactContext>(resumed.detached))
      for (const CompactContext::PlacedDiff& d : from->diffs())
        if (d.first + d.second->master()->n_tokens() <= resumed_tokens) inherited.push_back(d);
    auto c = CompactContext::compact(*ctx, runs, *e.model().model, e.pool(), std::move(inherited));
    if (c && !c->diffs().empty()) {
      auto compact = std::make_shared<const CompactContext>(std::move(*c));
      e.segments().add(compact->kept(), segments, compact, std::move(blended));
      return;
    }
  }
  e.segments().add(std::move(ctx), segments, nullptr, std::move(blended));
}

}  // namespace agentkv
