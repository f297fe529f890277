// The one owner of all KV memory of one model: the arena that holds the values, the BlockPool that
// tracks them, and KvSequence, the only way a sequence gets, shares, copies or frees blocks.
// Blocks of different models never mix: each model has its own manager, and the model fingerprint
// is part of every block hash.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kv/block_pool.h"
#include "kv/disk_tier.h"
#include "kv/redis_tier.h"
#include "model/kv_arena.h"
#include "model/model_config.h"
#include "util/status.h"

namespace agentkv {

struct KvManagerOptions {
  int block_size = 16;
  int64_t mem_bytes = 0;        // budget for K/V values; 0: default_kv_mem_bytes()
  bool prefix_caching = true;
  BlockHashFn hash = hash_block_tokens;
  // The tiers below RAM, in lookup order: the disk (off while disk.dir is empty), then Redis (off
  // while redis.nodes is empty). Evicted prefix blocks are written to each, and a prefix lookup that
  // misses RAM restores them from the first that holds a valid record.
  DiskTierOptions disk;
  RedisTierOptions redis;
};

// A quarter of physical RAM: leaves room for weights, logits and the rest of the system.
int64_t default_kv_mem_bytes();
// "1073741824", "512M", "4G", "1.5GiB", "64k" → bytes; an error names the malformed text.
Result<int64_t> parse_byte_size(std::string_view text);

class KvSequence;

class KvManager {
 public:
  // Fails (one line naming the sizes) when the budget holds less than one block.
  static Result<std::unique_ptr<KvManager>> create(const ModelConfig& cfg, uint64_t fingerprint,
                                                   const KvManagerOptions& opt);

  const KvArena& arena() const { return *arena_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  int block_size() const { return pool_.block_size(); }
  bool prefix_caching() const { return prefix_caching_; }
  int64_t bytes_per_block() const { return arena_->bytes_per_block(); }
  int64_t budget_bytes() const { return pool_.n_blocks() * bytes_per_block(); }
  int64_t used_bytes() const { return pool_.stats().n_used * bytes_per_block(); }

  // Copies every layer's K and V of block src into block dst.
  void copy_block(int32_t src, int32_t dst);

  // The lower tiers, in lookup order; each by its kind (nullptr when off).
  const std::vector<std::unique_ptr<KvTier>>& tiers() const { return tiers_; }
  DiskTier* disk_tier() const { return disk_; }
  RedisTier* redis_tier() const { return redis_; }
  // On a prefix-index miss: a new block holding `hash`'s K/V restored from the first lower tier with
  // a valid record (and given to the tiers above it too: a Redis hit lands on the local disk; and to
  // the shared tiers below it: a disk hit reaches the other servers), registered in the prefix index
  // and referenced for the caller; nullopt when no tier is on, none holds a valid record for these
  // tokens, or no block is free.
  std::optional<int32_t> restore_block(uint64_t hash, std::span<const int32_t> tokens);
  // A block just computed and registered in the prefix index: queued for the shared tiers (Redis), so
  // another server restores it instead of prefilling. Never waits for I/O.
  void publish_block(int32_t b, uint64_t hash, std::span<const int32_t> tokens);
  // Queues every exact full block of `seq` for the shared tiers again (set-if-absent: a record already
  // there stays), for a context about to move to another server (agent migration). Returns the
  // blocks queued (0 without a shared tier).
  int64_t publish_sequence(const KvSequence& seq);
  // Waits (any thread) until the shared tiers wrote what is queued, for at most `timeout`; false when
  // blocks still wait then.
  bool flush_shared_tiers(std::chrono::milliseconds timeout);

 private:
  KvManager(std::unique_ptr<KvArena> arena, int64_t n_blocks, int block_size, uint64_t fingerprint,
            const KvManagerOptions& opt);
  std::span<const uint8_t> block_bytes(int32_t b) const;
  std::unique_ptr<KvArena> arena_;
  BlockPool pool_;
  bool prefix_caching_;
  std::vector<std::unique_ptr<KvTier>> tiers_;
  bool any_shared_tier_ = false;
  DiskTier* disk_ = nullptr;
  RedisTier* redis_ = nullptr;
  std::vector<uint8_t> restore_buf_;  // a record's payload, checked before a block is taken for it
};

// The tokens match_prefix would reuse for `prompt` now (full cached blocks, leaving the last token
// to compute), without taking references or counting lookups: what a request will get as exact hits.
int64_t cached_prefix_tokens(const KvManager& m, std::span<const int32_t> prompt, uint64_t salt);

// A sequence's tokens-with-KV and its block table. Slot i (token i) lives in blocks()[i / block_size].
// Move-only; the destructor releases its blocks.
class KvSequence {
 public:
  explicit KvSequence(KvManager& m, uint64_t salt = 0);
  ~KvSequence();
  KvSequence(KvSequence&& o) noexcept;
  KvSequence& operator=(KvSequence&& o) noexcept;
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  const std::vector<int32_t>& blocks() const { return blocks_; }
  // Tokens whose K/V is in the blocks (slots [0, n_tokens())).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The chained hash of each full block, in order.
  const std::vector<uint64_t>& block_hashes() const { return hashes_; }
  int64_t n_tokens() const { return int64_t(tokens_.size()); }
  uint64_t salt() const { return salt_; }
  KvManager& manager() const { return *m_; }
  // Approximate K/V (reused at another position, selectively recomputed: src/share/) must never be
  // served as an exact prefix-cache hit. From the first full block at or after `slot`, commit()
  // registers nothing in the prefix index; forks and truncations keep the mark (blocks computed on
  // top of approximate K/V are approximate too).
  void mark_approximate_from(int64_t slot) { approx_from_ = std::min(approx_from_, slot); }
  bool approximate() const { return approx_from_ != kExact; }
  // The first slot whose K/V may be approximate (n_tokens() or more: none).
  int64_t approximate_from() const { return std::min<int64_t>(approx_from_, n_tokens()); }

  // Only on an empty sequence: takes the longest chain of cached full blocks that starts `prompt`,
  // at most (prompt.size() - 1) / block_size blocks so that at least one token is left to compute
  // (its logits are needed). Returns the number of tokens reused. No-op when prefix caching is off.
  int64_t match_prefix(std::span<const int32_t> prompt);

  // Blocks that reserve(n) would allocate (new blocks plus a copy of a shared partial last block).
  int64_t blocks_needed(int64_t n) const;
  // Makes slots [n_tokens(), n_tokens() + n) writable: allocates blocks and copies a shared partial
  // last block (copy on write). Returns false and changes nothing when the pool is short.
  bool reserve(int64_t n);
  // After the forward pass wrote K/V of `tokens` at slots [n_tokens(), ...): appends them and
  // registers every newly full block in the prefix index (when prefix caching is on).
  void commit(std::span<const int32_t> tokens);
  // A sequence sharing every block (refcounts +1) and the same tokens. Whichever of the two writes
  // next into a shared partial last block copies it first (reserve does).
  KvSequence fork() const;
  // The first n tokens (n <= n_tokens()) and their K/V copied into `into`, a manager of the same
  // geometry and block size (e.g. a private one, so that another thread can read them while this
  // manager's owner goes on); the approximate mark comes along. kResourceExhausted when `into` is
  // short, kInvalidArgument for another geometry.
  Result<KvSequence> copy_prefix_to(KvManager& into, int64_t n) const;
  // Keeps the first n tokens (n <= n_tokens()) and gives back the blocks past them; returns n. A
  // block cut inside is kept: reserve copies it before anything is written into it when it is
  // shared or in the prefix index (under its whole token run, which must not change).
  int64_t truncate(int64_t n);
  // Returns every block to the pool (tail first) and empties the sequence.
  void release();

  // Master–diff storage (engine/compact_context.h). drop_blocks releases blocks [first, last) and
  // leaves holes (kHole) in the table: those slots keep their tokens but have no K/V. A sequence with
  // holes is read only where has_kv, forked (holes stay holes) and truncated; reserve() refuses to
  // write into a hole, and fill_holes() gives every hole a new block of its own before it is written.
  static constexpr int32_t kHole = -1;
  void drop_blocks(int64_t first, int64_t last);
  // False (changing nothing) when the pool is short; the new blocks' contents are undefined.
  bool fill_holes();
  // The same for the holes among blocks [first, last) only.
  bool fill_holes(int64_t first, int64_t last);
  int64_t n_holes() const { return int64_t(std::count(blocks_.begin(), blocks_.end(), kHole)); }
  // Whether every slot of [begin, end) has K/V (none in a hole).
  bool has_kv(int64_t begin, int64_t end) const;

 private:
  bool must_copy(int32_t block) const;
  KvManager* m_;
  uint64_t salt_;
  static constexpr int64_t kExact = INT64_MAX;
  int64_t approx_from_ = kExact;
  std::vector<int32_t> blocks_;
  std::vector<int32_t> tokens_;
  std::vector<uint64_t> hashes_;  // chained hash of each full block, in order
};

}  // namespace agentkv
