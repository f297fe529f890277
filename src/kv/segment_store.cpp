// The segment cache (kv/segment_store.h).
#include "kv/segment_store.h"

#include <algorithm>

#include "kv/segment_index_record.h"

namespace agentkv {

namespace {

bool overlaps_any(const SegmentStore::Ranges& ranges, int64_t begin, int64_t end) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return r.first < end && begin < r.second; });
}

}  // namespace

bool SegmentStore::Hit::serves(int64_t begin, int64_t end) const {
  return (detached || context->has_kv(begin, end)) && !overlaps_any(blended, begin, end);
}

void SegmentStore::add(Context context, std::span<const std::pair<int64_t, int64_t>> segments,
                       std::shared_ptr<const Detached> detached, Ranges blended) {
  if (!context || context->n_tokens() == 0) return;
  const auto& toks = context->tokens();
  // Contexts this one continues (an agent's earlier turn, resumed: the common prefix is the same KV)
  // are superseded once the common prefix covers all their segments; their answer is not a segment.
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    const KvSequence& old = *it->context;
    int64_t seg_end = 0;
    for (const auto& sg : it->segments) seg_end = std::max(seg_end, sg.second);
    if (old.salt() == context->salt() && seg_end <= int64_t(toks.size()) &&
        std::equal(old.tokens().begin(), old.tokens().begin() + seg_end, toks.begin()))
      erase(it);
    it = next;
  }
  Entry e;
  e.context = std::move(context);
  e.blended = std::move(blended);
  for (const auto& [b, end] : segments) {
    if (b < 0 || end <= b || end > int64_t(toks.size()) || (!detached && !e.context->has_kv(b, end)) ||
        overlaps_any(e.blended, b, end))
      continue;
    const uint64_t k = segment_key(std::span<const int32_t>(toks).subspan(size_t(b), size_t(end - b)));
    e.segments.emplace_back(b, end);
    e.keys.push_back(k);
    index_.emplace(k, std::make_pair(e.context.get(), b));
  }
  const KvSequence* raw = e.context.get();
  e.used = ++clock_;
  for (int32_t b : raw->blocks())
    if (b != KvSequence::kHole) e.refs.push_back(b);
  if (detached) detached->add_block_refs(e.refs);
  e.detached = std::move(detached);
  for (int32_t b : e.refs) ++block_refs_[b];
  lru_.push_back(std::move(e));
  by_context_[raw] = std::prev(lru_.end());
  while (lru_.size() > max_contexts_) erase(lru_.begin());
}

std::vector<SegmentStore::Hit> SegmentStore::find(std::span<const int32_t> tokens, size_t max_hits) const {
  std::vector<std::pair<uint64_t, Hit>> found;  // (recency stamp, hit)
  auto [lo, hi] = index_.equal_range(segment_key(tokens));
  for (auto it = lo; it != hi; ++it) {
    const auto& [ctx, slot] = it->second;
    const auto& have = ctx->tokens();
    if (slot + int64_t(tokens.size()) > int64_t(have.size())) continue;
    if (!std::equal(tokens.begin(), tokens.end(), have.begin() + slot)) continue;  // a hash collision
    const auto e = by_context_.at(ctx);
    Hit hit{e->context, slot, e->blended, e->detached};
    if (!hit.serves(slot, slot + int64_t(tokens.size()))) continue;
    found.emplace_back(e->used, std::move(hit));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (found.size() > max_hits) found.resize(max_hits);
  std::vector<Hit> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

SegmentStore::PrefixHit SegmentStore::longest_prefix(std::span<const int32_t> prompt, uint64_t salt) const {
  PrefixHit best;
  for (const Entry& e : lru_) {
    if (e.context->salt() != salt) continue;
    const auto& have = e.context->tokens();
    const size_t limit = std::min(have.size(), prompt.size());
    size_t n = 0;
    while (n < limit && have[n] == prompt[n]) ++n;
    if (int64_t(n) >= best.tokens && n > 0) best = PrefixHit{e.context, e.detached, e.blended, int64_t(n)};  // ties: the most recent
  }
  return best;
}

void SegmentStore::touch(const KvSequence* context) {
  auto it = by_context_.find(context);
  if (it == by_context_.end()) return;
  it->second->used = ++clock_;
  lru_.splice(lru_.end(), lru_, it->second);
}

void SegmentStore::erase(std::list<Entry>::iterator it) {
  for (uint64_t k : it->keys) {
    auto [lo, hi] = index_.equal_range(k);
    for (auto j = lo; j != hi;) j = j->second.first == it->context.get() ? index_.erase(j) : std::next(j);
  }
  for (int32_t b : it->refs)
    if (auto r = block_refs_.find(b); r != block_refs_.end() && --r->second == 0) block_refs_.erase(r);
  by_context_.erase(it->context.get());
  lru_.erase(it);
}

bool SegmentStore::evict_lru() {
  if (lru_.empty()) return false;
  erase(lru_.begin());
  return true;
}

void SegmentStore::clear() {
  while (evict_lru()) {
  }
}

int64_t SegmentStore::n_blocks() const { return int64_t(block_refs_.size()); }

size_t SegmentStore::n_compact() const {
  return size_t(std::count_if(lru_.begin(), lru_.end(), [](const Entry& e) { return e.detached != nullptr; }));
}

int64_t SegmentStore::n_diff_blocks() const {
  int64_t n = 0;
  for (const Entry& e : lru_)
    if (e.detached) n += e.detached->diff_blocks();
  return n;
}

}  // namespace agentkv
