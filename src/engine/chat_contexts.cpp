// Storing and resuming chat contexts (engine/chat_contexts.h).
#include "engine/chat_contexts.h"

#include <algorithm>

namespace agentkv {

namespace {

// The expansion of a compact context, least recently used stored contexts evicted first while the pool
// is short (the caller holds `compact`, so its own blocks stay).
std::optional<KvSequence> expand_evicting(Engine& e, const CompactContext& compact) {
  while (e.kv().pool().num_free() < compact.n_dropped() && e.segments().evict_lru()) {
  }
  return compact.expand(*e.model().model, e.pool());
}

}  // namespace

std::optional<KvSequence> resume_stored_context(Engine& e, const SegmentStore::PrefixHit& hit) {
  const auto compact = std::dynamic_pointer_cast<const CompactContext>(hit.detached);
  if (!compact) return hit.context->fork();
  return expand_evicting(e, *compact);
}

std::shared_ptr<const KvSequence> master_for(Engine& e, const SegmentStore::Hit& hit, int64_t begin, int64_t end) {
  if (!hit.needs_expansion(begin, end)) return hit.context;
  const auto compact = std::dynamic_pointer_cast<const CompactContext>(hit.detached);
  if (!compact) return nullptr;
  auto x = expand_evicting(e, *compact);
  if (!x) return nullptr;
  return std::make_shared<const KvSequence>(std::move(*x));
}

void store_chat_context(Engine& e, std::shared_ptr<const KvSequence> ctx,
                        std::span<const std::pair<int64_t, int64_t>> segments, const std::vector<BlendedRun>& runs,
                        const SegmentStore::PrefixHit& resumed, int64_t resumed_tokens) {
  // With chat_original_masters, the whole blocks of its blended runs, those it resumed included, serve
  // no master: compact or not.
  SegmentStore::Ranges blended;
  if (e.chat_original_masters()) {
    for (const auto& r : resumed.blended)
      if (r.second <= resumed_tokens) blended.push_back(r);
    const int bs = e.kv().block_size();
    for (const BlendedRun& r : runs)
      if (const auto [first, last] = droppable_blocks(r.begin, r.n, bs); last > first)
        blended.emplace_back(first * bs, last * bs);
    std::sort(blended.begin(), blended.end());
  }
  const auto from = std::dynamic_pointer_cast<const CompactContext>(resumed.detached);
  if (e.chat_compact() && (!runs.empty() || from)) {
    auto c = CompactContext::compact(*ctx, runs, *e.model().model, e.pool(), e.diff_format(),
                                     from ? from->diffs_within(resumed_tokens) : std::vector<CompactContext::PlacedDiff>{});
    if (c && !c->diffs().empty()) {
      auto compact = std::make_shared<const CompactContext>(std::move(*c));
      e.segments().add(compact->kept(), segments, compact, std::move(blended));
      return;
    }
  }
  e.segments().add(std::move(ctx), segments, nullptr, std::move(blended));
}

}  // namespace agentkv
