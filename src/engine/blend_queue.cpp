// Grouped blending of chat requests' shared segments (engine/blend_queue.h).
#include "engine/blend_queue.h"

#include <map>
#include <tuple>

namespace agentkv {

size_t BlendQueue::flush(const Model& model, KvManager& kv, ThreadPool& pool, const std::function<bool()>& reclaim) {
  std::vector<PendingBlend> work;
  work.swap(pending_);
  const size_t frame = flushing_.size();
  flushing_.push_back(Flushing{&work, nullptr, 0});
  using Key = std::tuple<const KvSequence*, int32_t, std::vector<int32_t>, double, int, int>;
  std::map<Key, std::vector<size_t>> groups;
  for (size_t i = 0; i < work.size(); ++i) {
    const PendingBlend& b = work[i];
    groups[Key{b.master.get(), b.master_start, b.tokens, b.options.ratio, b.options.n_first, b.options.check_layer}]
        .push_back(i);
  }
  for (auto& [key, members] : groups) {
    const PendingBlend& first = work[members.front()];
    std::vector<const KvSequence*> prefixes;
    int64_t need = 0;
    for (size_t i : members) {
      prefixes.push_back(work[i].prefix.get());
      need += work[i].prefix->blocks_needed(int64_t(first.tokens.size()));
    }
    while (kv.pool().num_free() < need && reclaim && reclaim()) {
    }
    auto copies = collect_segment_copies(model, *first.master, first.master_start, first.tokens, prefixes,
                                         first.options, pool);
    flushing_[frame].copies = copies.ok() ? &*copies : nullptr;
    for (size_t k = 0; k < members.size(); ++k) {
      flushing_[frame].next_copy = k + 1;
      PendingBlend& b = work[members[k]];
      if (!copies.ok()) b.done(copies.status_error());
      else b.done(std::move((*copies)[k]));
    }
    flushing_[frame].copies = nullptr;
  }
  flushing_.pop_back();
  return groups.size();
}

void BlendQueue::for_each_held(const std::function<void(const KvSequence&)>& fn) const {
  auto blends = [&](const std::vector<PendingBlend>& v) {
    for (const PendingBlend& b : v) {
      if (b.prefix) fn(*b.prefix);
      if (b.master && b.master_is_copy) fn(*b.master);
    }
  };
  blends(pending_);
  for (const Flushing& f : flushing_) {
    blends(*f.work);
    if (f.copies)
      for (size_t k = f.next_copy; k < f.copies->size(); ++k) fn((*f.copies)[k].seq);
  }
}

}  // namespace agentkv
