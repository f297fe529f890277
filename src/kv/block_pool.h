// Bookkeeping for the KV blocks of one model: reference counts, the free queue (which is also the
// LRU eviction order) and the prefix index of full blocks keyed by chained hashes. No KV memory here:
// KvManager pairs a BlockPool with the arena that holds the values. Kept apart so it can be tested
// exactly (block ids, refcounts, eviction order) with no model.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace agentkv {

// Hash of a full block: its parent's hash, its token ids, the model fingerprint and a salt. Fixed
// seed, so hashes agree across processes (a later tier shares blocks between hosts).
uint64_t hash_block_tokens(uint64_t parent, std::span<const int32_t> tokens, uint64_t fingerprint,
                           uint64_t salt);
// Tests replace the hash to force collisions; hits must still verify token ids.
using BlockHashFn = uint64_t (*)(uint64_t parent, std::span<const int32_t> tokens, uint64_t fingerprint,
                                 uint64_t salt);

struct BlockPoolStats {
  int64_t n_blocks = 0;
  int64_t n_used = 0;         // refcount > 0
  int64_t n_free = 0;         // refcount == 0 (allocatable), cached or not
  int64_t n_cached = 0;       // in the prefix index (used or free)
  int64_t peak_used = 0;      // most blocks ever referenced at once
  int64_t lookups = 0;        // prefix-index lookups (blocks)
  int64_t hits = 0;           // lookups that returned a block
  int64_t collisions = 0;     // hash matched but token ids differed (not reused)
  int64_t evictions = 0;      // cached blocks taken from the free queue for new contents
};

class BlockPool {
 public:
  BlockPool(int64_t n_blocks, int block_size, uint64_t fingerprint, BlockHashFn hash = hash_block_tokens);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  uint64_t fingerprint() const { return fingerprint_; }
  int64_t num_free() const { return n_free_; }
  int32_t refcount(int32_t block) const;
  bool is_cached(int32_t block) const;
  BlockPoolStats stats() const;
  // Starts a new peak_used window (e.g. per benchmark round) at the current use.
  void reset_peak_used() { stats_.peak_used = n_blocks_ - n_free_; }

  // Takes the block at the head of the free queue (least recently freed; never-used blocks first,
  // in id order). A cached block taken this way is evicted from the prefix index. Refcount becomes 1.
  std::optional<int32_t> allocate();
  // All or nothing: appends n blocks to out, or returns false and changes nothing.
  bool allocate_n(int64_t n, std::vector<int32_t>& out);
  // refcount++; a free block (a cache hit on a block no one holds) leaves the free queue.
  void ref(int32_t block);
  // refcount--; at 0 the block goes to the tail of the free queue, staying in the prefix index
  // (and reusable by a hit) until allocate() evicts it.
  void unref(int32_t block);
  // Unrefs a whole block table in reverse, so a sequence's tail blocks are evicted before its
  // prefix blocks (prefixes are the most likely to be hit again).
  void release(std::span<const int32_t> table);

  uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t salt) const {
    return hash_(parent, tokens, fingerprint_, salt);
  }
  // A cached block with this hash and exactly these tokens, refed for the caller; nullopt on a miss
  // or when the hash matches but the token ids do not (counted as a collision).
  std::optional<int32_t> lookup(uint64_t hash, std::span<const int32_t> tokens);
  // Whether lookup would hit, without taking a reference or counting a lookup (planning a request).
  bool contains(uint64_t hash, std::span<const int32_t> tokens) const;
  // Registers a full, referenced block under hash (tokens.size() == block_size). If another block
  // already holds this hash the index keeps that one and this block stays uncached. Returns true
  // when this block was registered (false: the hash was already cached).
  bool insert(int32_t block, uint64_t hash, std::span<const int32_t> tokens);

  // Called with a cached block, its hash and tokens just before allocate() evicts it for new
  // contents: its K/V is still intact, so a lower tier can keep a copy (KvManager sets this).
  using EvictHook = std::function<void(int32_t block, uint64_t hash, std::span<const int32_t> tokens)>;
  void set_evict_hook(EvictHook hook) { evict_hook_ = std::move(hook); }

  // Free queue from head (next to be allocated) to tail, for tests.
  std::vector<int32_t> free_queue() const;

 private:
  void push_free_tail(int32_t b);
  void remove_free(int32_t b);
  void evict(int32_t b);

  int64_t n_blocks_;
  int block_size_;
  uint64_t fingerprint_;
  BlockHashFn hash_;
  std::vector<int32_t> refcount_;
  // Intrusive doubly-linked free queue: O(1) removal on a hit.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1;
  int64_t n_free_ = 0;
  // Prefix index: hash → block, and per cached block its hash and token ids (verified on a hit).
  std::unordered_map<uint64_t, int32_t> index_;
  std::vector<uint64_t> block_hash_;
  std::vector<uint8_t> cached_;
  std::vector<int32_t> block_tokens_;  // [n_blocks][block_size]
  BlockPoolStats stats_;
  EvictHook evict_hook_;
};

}  // namespace agentkv
