// A hand-made tiny model geometry for KV tests that need no model: two layers, kv_dim 4 (one KV head
// of 4), so a block of 4 tokens is 2 layers * (K + V) * 4 slots * 4 values * 2 bytes = 128 bytes.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model_config.h"

namespace agentkv::testing_kv {

inline ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = "test";
  c.n_layer = 2;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 4;
  return c;
}
inline constexpr int64_t kTinyBlockBytes4 = 2 * 2 * 4 * 4 * 2;  // per block of 4 tokens
inline constexpr int kBlock = 4;

// A manager of n_blocks blocks of kBlock tokens over tiny_config(), with the rest of opt as given.
inline std::unique_ptr<KvManager> make_manager_with(int64_t n_blocks, uint64_t fingerprint, KvManagerOptions opt) {
  opt.block_size = kBlock;
  opt.mem_bytes = n_blocks * kTinyBlockBytes4;
  auto m = KvManager::create(tiny_config(), fingerprint, opt);
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(m).value();
}

inline std::unique_ptr<KvManager> make_manager(int64_t n_blocks, bool prefix_caching = true,
                                               BlockHashFn hash = hash_block_tokens, uint64_t fingerprint = 77) {
  KvManagerOptions opt;
  opt.prefix_caching = prefix_caching;
  opt.hash = hash;
  return make_manager_with(n_blocks, fingerprint, opt);
}

// With lower tiers below RAM (each off when its options are empty): what the tier tests evict from
// and restore into.
inline std::unique_ptr<KvManager> make_tiered_manager(int64_t n_blocks, uint64_t fingerprint, const DiskTierOptions& disk,
                                                      const RedisTierOptions& redis = {}) {
  KvManagerOptions opt;
  opt.disk = disk;
  opt.redis = redis;
  return make_manager_with(n_blocks, fingerprint, opt);
}

// Reserves and commits tokens, filling each new block's K/V with a pattern of its first token, so
// a block restored from a tier can be compared byte for byte.
inline void commit_patterned(KvSequence& s, const std::vector<int32_t>& t) {
  ASSERT_TRUE(s.reserve(int64_t(t.size())));
  for (size_t i = 0; i < t.size(); i += kBlock) {
    auto* p = reinterpret_cast<uint8_t*>(s.manager().arena().block_data(s.blocks()[i / kBlock]));
    for (int64_t j = 0; j < kTinyBlockBytes4; ++j) p[j] = uint8_t(t[i] * 31 + j);
  }
  s.commit(t);
}

inline std::vector<int32_t> iota_tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Three layers of two KV heads of 8 (kv_dim 16), 4-token blocks: for what depends on heads (master–diff
// rows, their per-head scales).
inline ModelConfig two_head_config() {
  ModelConfig c = tiny_config();
  c.n_layer = 3;
  c.n_head_kv = 2;
  c.head_dim = c.n_rot = 8;
  return c;
}

inline std::unique_ptr<KvManager> make_two_head_manager(int64_t n_blocks) {
  KvManagerOptions opt;
  opt.block_size = kBlock;
  opt.mem_bytes = n_blocks * KvArena::bytes_per_block(two_head_config(), kBlock);
  auto m = KvManager::create(two_head_config(), 1, opt);
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(m).value();
}

// A block hash that makes every block collide: hits must still verify token ids.
inline uint64_t constant_hash(uint64_t, std::span<const int32_t>, uint64_t, uint64_t) { return 42; }

}  // namespace agentkv::testing_kv
