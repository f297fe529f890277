#include "kv/kv_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace agentkv {

namespace {

constexpr int kMaxBlockSize = 1024;

// Table indices [first, last) of the existing blocks that slots [start, start + n) fall into.
struct BlockRange {
  int64_t first = 0, last = 0;
};
BlockRange written_blocks(int64_t start, int64_t n, int64_t block_size, int64_t n_blocks) {
  if (n <= 0) return {};
  return {start / block_size, std::min(n_blocks, (start + n + block_size - 1) / block_size)};
}

}  // namespace

int64_t default_kv_mem_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  // Unknown RAM size: a budget that fits any machine that can run a model at all.
  if (pages <= 0 || page_size <= 0) return int64_t(1) << 30;
  return int64_t(pages) * int64_t(page_size) / 4;
}

Result<int64_t> parse_byte_size(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return make_error("invalid byte size '" + std::string(text) + "': " + why);
  };
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0;
  if (i == text.size() || !is_digit(text[i]))
    return bad("expected a non-negative number with an optional k/M/G/T suffix (e.g. 512M, 1.5GiB)");
  uint64_t whole = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const uint64_t d = uint64_t(text[i] - '0');
    if (whole > (uint64_t(std::numeric_limits<int64_t>::max()) - d) / 10) return bad("too large");
    whole = whole * 10 + d;
  }
  // The fraction as frac / den; digits past the 18th cannot change the result by a whole byte.
  uint64_t frac = 0, den = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (i == text.size() || !is_digit(text[i])) return bad("expected digits after '.'");
    for (; i < text.size() && is_digit(text[i]); ++i) {
      if (den >= 1000000000000000000ULL) continue;
      frac = frac * 10 + uint64_t(text[i] - '0');
      den *= 10;
    }
  }
  int shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: break;
    }
    if (shift) ++i;
  }
  const std::string_view rest = text.substr(i);
  if (!(rest.empty() || rest == "B" || (shift && rest == "iB")))
    return bad("unknown suffix '" + std::string(rest) + "' (use k, M, G or T, optionally followed by B or iB)");
  const uint64_t max = uint64_t(std::numeric_limits<int64_t>::max());
  if (whole > (max >> shift)) return bad("too large");
  // Fractional bytes are dropped: "1.5" is 1 byte, "0.5k" is 512.
  __extension__ using u128 = unsigned __int128;
  const uint64_t bytes = (whole << shift) + uint64_t((u128(frac) << shift) / den);
  if (bytes > max) return bad("too large");
  return int64_t(bytes);
}

Result<std::unique_ptr<KvManager>> KvManager::create(const ModelConfig& cfg, uint64_t fingerprint,
                                                     const KvManagerOptions& opt) {
  if (opt.block_size < 1 || opt.block_size > kMaxBlockSize)
    return make_error("KV block size " + std::to_string(opt.block_size) + " is outside [1, " +
                      std::to_string(kMaxBlockSize) + "]");
  if (cfg.n_layer <= 0 || cfg.kv_dim() <= 0)
    return make_error("KV cache: model has n_layer " + std::to_string(cfg.n_layer) + " and kv_dim " +
                      std::to_string(cfg.kv_dim()) + ", nothing to cache");
  if (opt.mem_bytes < 0) return make_error("KV memory budget " + std::to_string(opt.mem_bytes) + " is negative");
  const int64_t mem = opt.mem_bytes ? opt.mem_bytes : default_kv_mem_bytes();
  const int64_t per_block = KvArena::bytes_per_block(cfg, opt.block_size);
  int64_t n_blocks = mem / per_block;
  if (n_blocks < 1)
    return make_error("KV memory budget of " + std::to_string(mem) + " bytes is smaller than one block of " +
                      std::to_string(per_block) + " bytes (" + std::to_string(opt.block_size) + " tokens)");
  // Block ids are int32 in every block table; a budget past that is unusable anyway.
  n_blocks = std::min<int64_t>(n_blocks, std::numeric_limits<int32_t>::max());
  auto arena = std::make_unique<KvArena>(cfg, opt.block_size, n_blocks);
  if (!arena->valid())
    return make_error("KV cache: could not map " + std::to_string(n_blocks * per_block) +
                      " bytes of address space (budget " + std::to_string(mem) + " bytes)");
  std::unique_ptr<KvManager> m(new KvManager(std::move(arena), n_blocks, opt.block_size, fingerprint, opt));
  const TierRecordShape shape = tier_shape_of(*m->arena_, cfg.n_head_kv, cfg.head_dim);
  if (!opt.disk.dir.empty()) {
    std::unique_ptr<DiskTier> disk;
    AGENTKV_ASSIGN_OR_RETURN(disk, DiskTier::open(opt.disk, fingerprint, shape));
    m->disk_ = disk.get();
    m->tiers_.push_back(std::move(disk));
  }
  if (!opt.redis.nodes.empty()) {
    std::unique_ptr<RedisTier> redis;
    AGENTKV_ASSIGN_OR_RETURN(redis, RedisTier::open(opt.redis, fingerprint, shape));
    m->redis_ = redis.get();
    m->tiers_.push_back(std::move(redis));
  }
  for (const auto& tier : m->tiers_) m->any_shared_tier_ |= tier->shared();
  // A shared tier got the block when it was computed (publish_block): eviction writes the local ones.
  if (!m->tiers_.empty())
    m->pool_.set_evict_hook([km = m.get()](int32_t b, uint64_t hash, std::span<const int32_t> tokens) {
      for (const auto& tier : km->tiers_)
        if (!tier->shared()) tier->store(hash, tokens, km->block_bytes(b));
    });
  return m;
}

KvManager::KvManager(std::unique_ptr<KvArena> arena, int64_t n_blocks, int block_size, uint64_t fingerprint,
                     const KvManagerOptions& opt)
    : arena_(std::move(arena)),
      pool_(n_blocks, block_size, fingerprint, opt.hash),
      prefix_caching_(opt.prefix_caching) {}

void KvManager::copy_block(int32_t src, int32_t dst) {
  AGENTKV_CHECK(src >= 0 && src < pool_.n_blocks() && dst >= 0 && dst < pool_.n_blocks());
  if (src == dst) return;
  // A block's layers, K and V, are one contiguous stride.
  std::memcpy(arena_->block_data(dst), arena_->block_data(src), size_t(bytes_per_block()));
}

std::span<const uint8_t> KvManager::block_bytes(int32_t b) const {
  return {reinterpret_cast<const uint8_t*>(arena_->block_data(b)), size_t(bytes_per_block())};
}

std::optional<int32_t> KvManager::restore_block(uint64_t hash, std::span<const int32_t> tokens) {
  if (tiers_.empty() || pool_.num_free() == 0) return std::nullopt;
  // Into a buffer first: a block is taken (possibly evicting a cached one) only for a valid record.
  restore_buf_.resize(size_t(bytes_per_block()));
  size_t hit = 0;
  while (hit < tiers_.size() && !tiers_[hit]->load(hash, tokens, restore_buf_)) ++hit;
  if (hit == tiers_.size()) return std::nullopt;
  for (size_t i = 0; i < tiers_.size(); ++i)
    if (i < hit || (i > hit && tiers_[i]->shared())) tiers_[i]->store(hash, tokens, restore_buf_);
  const int32_t b = *pool_.allocate();
  std::memcpy(arena_->block_data(b), restore_buf_.data(), restore_buf_.size());
  pool_.insert(b, hash, tokens);
  return b;
}

void KvManager::publish_block(int32_t b, uint64_t hash, std::span<const int32_t> tokens) {
  if (!any_shared_tier_) return;
  for (const auto& tier : tiers_)
    if (tier->shared()) tier->store(hash, tokens, block_bytes(b));
}

int64_t KvManager::publish_sequence(const KvSequence& seq) {
  if (!any_shared_tier_) return 0;
  const int64_t bs = block_size();
  const int64_t n_exact = std::min<int64_t>(seq.approximate_from(), int64_t(seq.block_hashes().size()) * bs) / bs;
  int64_t queued = 0;
  for (int64_t i = 0; i < n_exact; ++i) {
    const std::span<const int32_t> tokens(seq.tokens().data() + i * bs, size_t(bs));
    publish_block(seq.blocks()[size_t(i)], seq.block_hashes()[size_t(i)], tokens);
    ++queued;
  }
  return queued;
}

bool KvManager::flush_shared_tiers(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool all = true;
  for (const auto& tier : tiers_)
    if (tier->shared())
      all = tier->flush_for(std::chrono::duration_cast<std::chrono::milliseconds>(
                std::max(deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero()))) &&
            all;
  return all;
}

KvSequence::KvSequence(KvManager& m, uint64_t salt) : m_(&m), salt_(salt) {}

KvSequence::~KvSequence() { release(); }

KvSequence::KvSequence(KvSequence&& o) noexcept
    : m_(o.m_), salt_(o.salt_), approx_from_(o.approx_from_), blocks_(std::move(o.blocks_)), tokens_(std::move(o.tokens_)),
      hashes_(std::move(o.hashes_)) {
  o.blocks_.clear();
  o.tokens_.clear();
  o.hashes_.clear();
}

KvSequence& KvSequence::operator=(KvSequence&& o) noexcept {
  if (this == &o) return *this;
  release();
  m_ = o.m_;
  salt_ = o.salt_;
  approx_from_ = o.approx_from_;
  blocks_ = std::move(o.blocks_);
  tokens_ = std::move(o.tokens_);
  hashes_ = std::move(o.hashes_);
  o.blocks_.clear();
  o.tokens_.clear();
  o.hashes_.clear();
  return *this;
}

int64_t KvSequence::match_prefix(std::span<const int32_t> prompt) {
  AGENTKV_CHECK(tokens_.empty() && blocks_.empty());
  if (!m_->prefix_caching() || prompt.empty()) return 0;
  BlockPool& pool = m_->pool();
  const size_t bs = size_t(m_->block_size());
  // The last prompt token is always computed: its logits pick the next token.
  const size_t max_blocks = (prompt.size() - 1) / bs;
  uint64_t parent = 0;
  for (size_t i = 0; i < max_blocks; ++i) {
    const std::span<const int32_t> block_tokens = prompt.subspan(i * bs, bs);
    const uint64_t h = pool.chain_hash(parent, block_tokens, salt_);
    std::optional<int32_t> b = pool.lookup(h, block_tokens);
    if (!b) b = m_->restore_block(h, block_tokens);
    if (!b) break;
    blocks_.push_back(*b);
    hashes_.push_back(h);
    tokens_.insert(tokens_.end(), block_tokens.begin(), block_tokens.end());
    parent = h;
  }
  return n_tokens();
}

int64_t cached_prefix_tokens(const KvManager& m, std::span<const int32_t> prompt, uint64_t salt) {
  if (!m.prefix_caching() || prompt.empty()) return 0;
  const BlockPool& pool = m.pool();
  const size_t bs = size_t(m.block_size());
  const size_t max_blocks = (prompt.size() - 1) / bs;
  uint64_t parent = 0;
  size_t i = 0;
  for (; i < max_blocks; ++i) {
    const std::span<const int32_t> block_tokens = prompt.subspan(i * bs, bs);
    const uint64_t h = pool.chain_hash(parent, block_tokens, salt);
    if (!pool.contains(h, block_tokens)) break;
    parent = h;
  }
  return int64_t(i * bs);
}

bool KvSequence::must_copy(int32_t block) const {
  // Shared with another sequence, or in the prefix index under its whole token run (a cut inside a
  // full block, then different tokens): written only after a copy, so neither is changed under it.
  return m_->pool().refcount(block) > 1 || m_->pool().is_cached(block);
}

int64_t KvSequence::blocks_needed(int64_t n) const {
  AGENTKV_CHECK(n >= 0);
  if (n == 0) return 0;
  const int64_t bs = m_->block_size();
  const int64_t have = int64_t(blocks_.size());
  int64_t needed = std::max<int64_t>(0, (n_tokens() + n + bs - 1) / bs - have);
  // Existing blocks about to be written must be ours alone. Usually that is just a partial last block
  // after fork(); blocks reserved ahead of n_tokens() and then forked count too.
  const BlockRange r = written_blocks(n_tokens(), n, bs, have);
  for (int64_t i = r.first; i < r.last; ++i) {
    AGENTKV_CHECK(blocks_[size_t(i)] != kHole);  // fill_holes first
    if (must_copy(blocks_[size_t(i)])) ++needed;
  }
  return needed;
}

bool KvSequence::reserve(int64_t n) {
  std::vector<int32_t> fresh;
  if (!m_->pool().allocate_n(blocks_needed(n), fresh)) return false;
  const int64_t bs = m_->block_size();
  size_t next = 0;
  const BlockRange r = written_blocks(n_tokens(), n, bs, int64_t(blocks_.size()));
  for (int64_t i = r.first; i < r.last; ++i) {
    const int32_t old = blocks_[size_t(i)];
    if (!must_copy(old)) continue;
    const int32_t copy = fresh[next++];
    // Only a block holding committed tokens has contents worth copying.
    if (i * bs < n_tokens()) m_->copy_block(old, copy);
    m_->pool().unref(old);
    blocks_[size_t(i)] = copy;
  }
  blocks_.insert(blocks_.end(), fresh.begin() + ptrdiff_t(next), fresh.end());
  return true;
}

void KvSequence::commit(std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  BlockPool& pool = m_->pool();
  const int64_t bs = m_->block_size();
  const int64_t start = n_tokens(), end = start + int64_t(tokens.size());
  AGENTKV_CHECK(end <= int64_t(blocks_.size()) * bs);
  // The forward pass wrote these slots: a block shared with another sequence would have been
  // overwritten under it (reserve copies shared blocks; a fork between reserve and commit is a bug).
  const BlockRange r = written_blocks(start, int64_t(tokens.size()), bs, int64_t(blocks_.size()));
  for (int64_t i = r.first; i < r.last; ++i) AGENTKV_CHECK(pool.refcount(blocks_[size_t(i)]) == 1);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  for (int64_t i = start / bs; i < end / bs; ++i) {
    AGENTKV_CHECK(int64_t(hashes_.size()) == i);
    const std::span<const int32_t> block_tokens(tokens_.data() + i * bs, size_t(bs));
    const uint64_t h = pool.chain_hash(i == 0 ? 0 : hashes_[size_t(i - 1)], block_tokens, salt_);
    hashes_.push_back(h);
    if (m_->prefix_caching() && (i + 1) * bs <= approx_from_ && pool.insert(blocks_[size_t(i)], h, block_tokens))
      m_->publish_block(blocks_[size_t(i)], h, block_tokens);
  }
}

KvSequence KvSequence::fork() const {
  KvSequence child(*m_, salt_);
  child.approx_from_ = approx_from_;
  child.blocks_ = blocks_;
  child.tokens_ = tokens_;
  child.hashes_ = hashes_;
  for (int32_t b : blocks_)
    if (b != kHole) m_->pool().ref(b);
  return child;
}

Result<KvSequence> KvSequence::copy_prefix_to(KvManager& into, int64_t n) const {
  AGENTKV_CHECK(n >= 0 && n <= n_tokens());
  if (into.block_size() != m_->block_size() || into.bytes_per_block() != m_->bytes_per_block())
    return make_error(ErrorCode::kInvalidArgument, "KV copy: the target manager has another block geometry");
  KvSequence copy(into, salt_);
  if (!copy.reserve(n))
    return make_error(ErrorCode::kResourceExhausted, "KV copy: the target has no room for " + std::to_string(n) + " tokens");
  // A block's layers, K and V, are one contiguous stride (model/kv_arena.h).
  const int64_t bs = m_->block_size();
  for (int64_t i = 0; i < (n + bs - 1) / bs; ++i)
    std::memcpy(into.arena().block_data(copy.blocks_[size_t(i)]), m_->arena().block_data(blocks_[size_t(i)]),
                size_t(m_->bytes_per_block()));
  copy.approx_from_ = approx_from_;
  copy.commit(std::span<const int32_t>(tokens_).first(size_t(n)));
  return copy;
}

int64_t KvSequence::truncate(int64_t n) {
  AGENTKV_CHECK(n >= 0 && n <= n_tokens());
  const int64_t bs = m_->block_size();
  const size_t keep = size_t((n + bs - 1) / bs);
  while (blocks_.size() > keep) {  // tail first, like release(): the tail is evicted first
    if (blocks_.back() != kHole) m_->pool().unref(blocks_.back());
    blocks_.pop_back();
  }
  tokens_.resize(size_t(n));
  hashes_.resize(std::min(hashes_.size(), size_t(n / bs)));
  return n;
}

void KvSequence::release() {
  std::erase(blocks_, kHole);
  m_->pool().release(blocks_);
  approx_from_ = kExact;
  blocks_.clear();
  tokens_.clear();
  hashes_.clear();
}

}  // namespace agentkv

namespace agentkv {

void KvSequence::drop_blocks(int64_t first, int64_t last) {
  AGENTKV_CHECK(first >= 0 && first <= last && last <= int64_t(blocks_.size()));
  for (int64_t i = last; i-- > first;) {  // tail first, like release()
    int32_t& b = blocks_[size_t(i)];
    if (b != kHole) m_->pool().unref(b);
    b = kHole;
  }
}

bool KvSequence::fill_holes() { return fill_holes(0, int64_t(blocks_.size())); }

bool KvSequence::fill_holes(int64_t first, int64_t last) {
  AGENTKV_CHECK(first >= 0 && first <= last && last <= int64_t(blocks_.size()));
  const auto b0 = blocks_.begin() + first, b1 = blocks_.begin() + last;
  std::vector<int32_t> fresh;
  if (!m_->pool().allocate_n(std::count(b0, b1, kHole), fresh)) return false;
  size_t next = 0;
  for (auto it = b0; it != b1; ++it)
    if (*it == kHole) *it = fresh[next++];
  return true;
}

bool KvSequence::has_kv(int64_t begin, int64_t end) const {
  if (begin < 0 || end > n_tokens()) return false;
  const int64_t bs = m_->block_size();
  for (int64_t i = begin / bs; i * bs < end; ++i)
    if (blocks_[size_t(i)] == kHole) return false;
  return true;
}

}  // namespace agentkv
