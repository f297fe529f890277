#include "kv/block_pool.h"

#include <algorithm>
#include <limits>

#include "util/status.h"

namespace agentkv {

namespace {

// splitmix64's finalizer: a bijection whose every output bit depends on every input bit.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// For a fixed state distinct words give distinct states (both steps are bijections), so the
// sequence is absorbed without cancellation.
uint64_t absorb(uint64_t h, uint64_t word) { return mix64(h ^ (word * 0x9e3779b97f4a7c15ULL)); }

// Fixed, so that every process (and every host) computes the same hash for the same block.
constexpr uint64_t kBlockHashSeed = 0x6a09e667f3bcc908ULL;

}  // namespace

uint64_t hash_block_tokens(uint64_t parent, std::span<const int32_t> tokens, uint64_t fingerprint,
                           uint64_t salt) {
  uint64_t h = kBlockHashSeed;
  h = absorb(h, parent);
  h = absorb(h, fingerprint);
  h = absorb(h, salt);
  h = absorb(h, tokens.size());
  for (int32_t t : tokens) h = absorb(h, uint32_t(t));
  return mix64(h);
}

BlockPool::BlockPool(int64_t n_blocks, int block_size, uint64_t fingerprint, BlockHashFn hash)
    : n_blocks_(n_blocks), block_size_(block_size), fingerprint_(fingerprint), hash_(hash) {
  // Block ids are int32 everywhere (block tables, batches).
  AGENTKV_CHECK(n_blocks >= 0 && n_blocks <= std::numeric_limits<int32_t>::max());
  AGENTKV_CHECK(block_size > 0);
  AGENTKV_CHECK(hash != nullptr);
  refcount_.assign(size_t(n_blocks), 0);
  prev_.assign(size_t(n_blocks), -1);
  next_.assign(size_t(n_blocks), -1);
  block_hash_.assign(size_t(n_blocks), 0);
  cached_.assign(size_t(n_blocks), 0);
  block_tokens_.assign(size_t(n_blocks) * size_t(block_size), 0);
  for (int32_t b = 0; b < int32_t(n_blocks); ++b) push_free_tail(b);
  stats_.n_blocks = n_blocks;
}

int32_t BlockPool::refcount(int32_t block) const {
  AGENTKV_CHECK(block >= 0 && block < n_blocks_);
  return refcount_[size_t(block)];
}

bool BlockPool::is_cached(int32_t block) const {
  AGENTKV_CHECK(block >= 0 && block < n_blocks_);
  return cached_[size_t(block)] != 0;
}

BlockPoolStats BlockPool::stats() const {
  BlockPoolStats s = stats_;
  s.n_free = n_free_;
  s.n_used = n_blocks_ - n_free_;
  s.n_cached = int64_t(index_.size());
  return s;
}

std::optional<int32_t> BlockPool::allocate() {
  if (head_ < 0) return std::nullopt;
  const int32_t b = head_;
  remove_free(b);
  if (cached_[size_t(b)]) evict(b);
  refcount_[size_t(b)] = 1;
  stats_.peak_used = std::max(stats_.peak_used, n_blocks_ - n_free_);
  return b;
}

bool BlockPool::allocate_n(int64_t n, std::vector<int32_t>& out) {
  AGENTKV_CHECK(n >= 0);
  if (n > n_free_) return false;
  out.reserve(out.size() + size_t(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(*allocate());
  return true;
}

void BlockPool::ref(int32_t block) {
  AGENTKV_CHECK(block >= 0 && block < n_blocks_);
  int32_t& rc = refcount_[size_t(block)];
  if (rc == 0) {
    remove_free(block);
    stats_.peak_used = std::max(stats_.peak_used, n_blocks_ - n_free_);
  }
  ++rc;
}

void BlockPool::unref(int32_t block) {
  AGENTKV_CHECK(block >= 0 && block < n_blocks_);
  int32_t& rc = refcount_[size_t(block)];
  AGENTKV_CHECK(rc > 0);
  if (--rc == 0) push_free_tail(block);
}

void BlockPool::release(std::span<const int32_t> table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) unref(*it);
}

std::optional<int32_t> BlockPool::lookup(uint64_t hash, std::span<const int32_t> tokens) {
  ++stats_.lookups;
  auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  const int32_t b = it->second;
  const int32_t* stored = block_tokens_.data() + size_t(b) * size_t(block_size_);
  if (tokens.size() != size_t(block_size_) || !std::equal(tokens.begin(), tokens.end(), stored)) {
    ++stats_.collisions;
    return std::nullopt;
  }
  ref(b);
  ++stats_.hits;
  return b;
}

bool BlockPool::contains(uint64_t hash, std::span<const int32_t> tokens) const {
  auto it = index_.find(hash);
  if (it == index_.end() || tokens.size() != size_t(block_size_)) return false;
  const int32_t* stored = block_tokens_.data() + size_t(it->second) * size_t(block_size_);
  return std::equal(tokens.begin(), tokens.end(), stored);
}

bool BlockPool::insert(int32_t block, uint64_t hash, std::span<const int32_t> tokens) {
  AGENTKV_CHECK(block >= 0 && block < n_blocks_);
  AGENTKV_CHECK(tokens.size() == size_t(block_size_));
  AGENTKV_CHECK(refcount_[size_t(block)] > 0);
  if (index_.count(hash)) return false;
  // A full block's contents never change, so a cached block has no second hash.
  AGENTKV_CHECK(!cached_[size_t(block)]);
  index_.emplace(hash, block);
  block_hash_[size_t(block)] = hash;
  cached_[size_t(block)] = 1;
  std::copy(tokens.begin(), tokens.end(), block_tokens_.begin() + ptrdiff_t(size_t(block) * size_t(block_size_)));
  return true;
}

std::vector<int32_t> BlockPool::free_queue() const {
  std::vector<int32_t> q;
  q.reserve(size_t(n_free_));
  for (int32_t b = head_; b >= 0; b = next_[size_t(b)]) q.push_back(b);
  return q;
}

void BlockPool::push_free_tail(int32_t b) {
  prev_[size_t(b)] = tail_;
  next_[size_t(b)] = -1;
  if (tail_ >= 0) {
    next_[size_t(tail_)] = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++n_free_;
}

void BlockPool::remove_free(int32_t b) {
  const int32_t p = prev_[size_t(b)], n = next_[size_t(b)];
  if (p >= 0) {
    next_[size_t(p)] = n;
  } else {
    head_ = n;
  }
  if (n >= 0) {
    prev_[size_t(n)] = p;
  } else {
    tail_ = p;
  }
  prev_[size_t(b)] = next_[size_t(b)] = -1;
  --n_free_;
}

void BlockPool::evict(int32_t b) {
  auto it = index_.find(block_hash_[size_t(b)]);
  AGENTKV_CHECK(it != index_.end() && it->second == b);
  if (evict_hook_)
    evict_hook_(b, it->first, std::span<const int32_t>(block_tokens_.data() + size_t(b) * size_t(block_size_), size_t(block_size_)));
  index_.erase(it);
  cached_[size_t(b)] = 0;
  ++stats_.evictions;
}

}  // namespace agentkv
