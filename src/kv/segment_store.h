// The segment cache of collective KV sharing in ordinary chat traffic (issue 14). Every message of a
// chat request is a segment: its content's tokens, tokenized on their own so they are the same ids
// at any position (share/turn_pieces.h). After a request, its whole context (prompt and answer) is
// kept here, and each of its segments indexed by content: a later request that holds the same
// message at another position, after another prefix, reuses this KV as the message's master (exact
// re-rotation plus selective recompute, engine/chat_sharing.h), and a request that continues the
// same conversation resumes from the context itself.
//
// Contexts live inside the KV budget: they hold block references like any sequence (blocks shared
// with the prefix cache and with each other cost nothing extra), are least-recently-used first to
// go, and the scheduler evicts them before it preempts a running request or refuses a waiting one.
// A context in use by a request is held by a shared_ptr, so evicting it only drops the store's
// reference. Blended (approximate) contexts are stored too: their KV never enters the exact prefix
// index (KvSequence::mark_approximate_from), and this store is the only way anything reuses it,
// always reported as approximate.
//
// A context stored in master–diff form (engine/compact_context.h) is its sequence with the whole
// blocks of its blended runs dropped (holes) plus a Detached part (the diffs and the master blocks they
// pin) that the store keeps alive and counts. It serves everything a dense copy would: a request
// continuing it resumes from its expansion, and a request reusing a message from its holes blends from
// its expansion (bit-identical to the dense copy), so compaction changes nothing a request is served.
// Optionally (`blended`, EngineOptions::chat_original_masters) the whole blocks of a context's blended
// runs serve no master: a later request then reuses the original master of those segments instead.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/kv_manager.h"

namespace agentkv {

class SegmentStore {
 public:
  using Context = std::shared_ptr<const KvSequence>;
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;  // token ranges [begin, end)
  // What a compact context holds besides its sequence's blocks (engine/compact_context.h).
  class Detached {
   public:
    virtual ~Detached() = default;
    // Appends each block it holds a reference on, once per reference.
    virtual void add_block_refs(std::vector<int32_t>& out) const = 0;
    // Blocks holding its diff rows (what it costs beyond its kept blocks and its masters').
    virtual int64_t diff_blocks() const = 0;
  };

  struct Hit {
    Context context;
    int64_t slot = 0;  // where the segment's tokens start in the context
    Ranges blended;    // the context's ranges that serve no master
    // Non-null: the context is compact (it has holes); a master over its holes is its expansion.
    std::shared_ptr<const Detached> detached;
    // Whether the context's slots [begin, end) may serve as a master (holes through the expansion).
    bool serves(int64_t begin, int64_t end) const;
    // Whether serving slots [begin, end) needs the expansion.
    bool needs_expansion(int64_t begin, int64_t end) const { return !context->has_kv(begin, end); }
  };
  struct PrefixHit {
    Context context;
    std::shared_ptr<const Detached> detached;  // non-null: context has holes, resume from its expansion
    Ranges blended;
    int64_t tokens = 0;  // the longest common prefix of the context and the prompt
  };

  // max_contexts: the most contexts kept at once (the oldest goes first beyond it).
  explicit SegmentStore(size_t max_contexts = 256) : max_contexts_(max_contexts) {}

  // Keeps `context` with its segments (token ranges [begin, end) of its tokens, non-empty). A stored
  // context that this one continues through its last segment is dropped: this one resumed from it,
  // so it holds the same KV for everything the old one could serve. detached: the rest of a compact
  // context (context then has holes). blended: the whole blocks of its blended runs, ascending (the
  // holes when compact); segments there are not indexed.
  void add(Context context, std::span<const std::pair<int64_t, int64_t>> segments,
           std::shared_ptr<const Detached> detached = nullptr, Ranges blended = {});
  // Stored contexts holding exactly `tokens`, with their K/V, as one of their segments, most recently
  // used first, at most max_hits of them.
  std::vector<Hit> find(std::span<const int32_t> tokens, size_t max_hits = 8) const;
  // The stored context with the longest common prefix with `prompt` (salt must match; 0 tokens: none).
  PrefixHit longest_prefix(std::span<const int32_t> prompt, uint64_t salt) const;
  // Marks a context as just used (it goes last in the eviction order).
  void touch(const KvSequence* context);
  // Drops the least recently used context; false when the store is empty.
  bool evict_lru();
  void clear();

  size_t n_contexts() const { return lru_.size(); }
  // Of those, the contexts in master–diff form, and the blocks their diff rows take.
  size_t n_compact() const;
  int64_t n_diff_blocks() const;
  // Distinct KV blocks the stored contexts reference (shared ones counted once), compact ones' diffs
  // and pinned master blocks included.
  int64_t n_blocks() const;
  // Adds to refs[block] the references the stored contexts hold (admission counts them as
  // reclaimable, not pinned: engine/kv_admission.h).
  void add_block_refs(std::vector<int32_t>& refs) const {
    for (const auto& [b, n] : block_refs_) refs[size_t(b)] += n;
  }

 private:
  struct Entry {
    Context context;
    std::vector<std::pair<int64_t, int64_t>> segments;
    std::vector<uint64_t> keys;
    std::shared_ptr<const Detached> detached;
    Ranges blended;
    std::vector<int32_t> refs;  // every block reference the entry holds (context and detached)
    uint64_t used = 0;          // recency stamp
  };
  void erase(std::list<Entry>::iterator it);

  size_t max_contexts_;
  std::list<Entry> lru_;  // least recently used first
  std::unordered_map<const KvSequence*, std::list<Entry>::iterator> by_context_;
  std::unordered_multimap<uint64_t, std::pair<const KvSequence*, int64_t>> index_;  // segment key → (context, slot)
  std::unordered_map<int32_t, int32_t> block_refs_;  // block → stored contexts referencing it
  uint64_t clock_ = 0;
};

}  // namespace agentkv
