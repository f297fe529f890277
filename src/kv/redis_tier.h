// The Redis tier: every exact full KV block, written as soon as it is computed, kept in one or more Redis
// nodes, so another agentkv process (or this one, later) restores it instead of prefilling. One tier record
// (kv/tier_record.h) per block under agentkv:v<record version>:<fingerprint hex>:<block hash hex>,
// written once (SET NX) with a TTL by a background writer on its own connections; lookups GET on
// the caller's thread with a short timeout. A record that fails a check is deleted and never used;
// a node that is down or slow makes lookups misses (counted as fallbacks) and is retried with
// backoff, not on every lookup. Keys are sharded over the nodes on the client side.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_tier.h"
#include "kv/tier_record.h"
#include "util/status.h"

namespace agentkv {

struct RedisNode {
  std::string host;
  int port = 6379;
};

// "host:port[,host:port...]" ("[::1]:6379" for IPv6) → nodes; an error names the malformed entry.
Result<std::vector<RedisNode>> parse_redis_nodes(std::string_view text);

struct RedisTierOptions {
  std::vector<RedisNode> nodes;  // empty: the tier is off
  int ttl_s = 3600;              // each record's lifetime in Redis
  int timeout_ms = 50;           // connect and command timeout of lookups (the engine thread waits this long at most)
  // Blocks waiting to be written; more are dropped. Every computed block is written (the tier is
  // shared), so a long prompt queues tens at once: 256 SmolLM2 blocks are ~94 MB.
  int max_queued = 256;
  // After a node fails, the next attempt waits retry_min_ms, doubling per failure up to retry_max_ms.
  int retry_min_ms = 250;
  int retry_max_ms = 8000;
};

class RedisTier final : public KvTier {
 public:
  // Connects lazily: a node that is down at start-up is a fallback until it answers.
  static Result<std::unique_ptr<RedisTier>> open(const RedisTierOptions& opt, uint64_t fingerprint,
                                                 const TierRecordShape& shape);
  // Writes what is queued (or fails it quickly when a node is down), then stops the writer.
  ~RedisTier() override;
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  const char* name() const override { return "redis"; }
  bool shared() const override { return true; }
  bool load(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) override;

  // The key of `hash`'s record, and the index in opt.nodes of the node that holds it.
  std::string key_of(uint64_t hash) const;
  size_t node_of(uint64_t hash) const;

 private:
  class Link;  // one connection to one node (redis_tier.cpp)
  RedisTier(const RedisTierOptions& opt, uint64_t fingerprint, const TierRecordShape& shape);
  void write_block(const TierWriteQueue::Block& b);

  RedisTierOptions opt_;
  uint64_t fingerprint_;
  TierRecordShape shape_;
  std::string key_prefix_;
  std::vector<std::unique_ptr<Link>> readers_;  // used by load() only (the engine thread)
  std::vector<std::unique_ptr<Link>> writers_;  // used by the writer thread only
};

}  // namespace agentkv
