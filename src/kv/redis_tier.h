// The Redis tier: every exact full KV block, written as soon as it is computed, kept in one or more Redis
// nodes, so another agentkv process (or this one, later) restores it instead of prefilling. One tier record
// (kv/tier_record.h) per block under agentkv:v<record version>:<fingerprint hex>:<block hash hex>,
// written once (SET NX) with a TTL by a background writer on its own connections; lookups GET on
// the caller's thread with a short timeout. A record that fails a check is deleted and never used;
// a node that is down or slow makes lookups misses (counted as fallbacks) and is retried with
// backoff, not on every lookup. Keys are sharded over the nodes on the client side.
//
// The tier also shares chat-sharing segment masters (kv/segment_index_record.h): one small index
// record per message segment under agentkv:seg:v<version>:<fingerprint hex>:<segment key hex>, written
// SET NX with the TTL by a second background writer (a record never waits behind a queue of blocks,
// nor a block behind records) and read on the caller's thread over the same connections, timeout and
// backoff as block lookups; counted apart (segment_stats(), tier="redis_segments" in /metrics).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_tier.h"
#include "kv/segment_index_record.h"
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

  // Queues the index record of the segment tokens[begin, end) of a master context whose tokens start
  // with `tokens` (its KV exact through the segment's end); never waits for I/O. Dropped and counted
  // when the queue is full.
  void store_segment(std::span<const int32_t> tokens, int64_t begin);
  // The index record of a master holding `segment`, when a node holds one that passes every check
  // (one that fails is deleted); nullopt otherwise, in bounded time also when Redis is down.
  std::optional<SegmentIndex> load_segment(std::span<const int32_t> segment);
  // The key of the record of the segment with content key `key` (kv/segment_index_record.h).
  std::string segment_key_of(uint64_t key) const;
  TierStats segment_stats() const;
  // Waits until every queued segment record is written (or failed), for at most `timeout`.
  bool flush_segments_for(std::chrono::milliseconds timeout);

 private:
  class Link;  // one connection to one node (redis_tier.cpp)
  RedisTier(const RedisTierOptions& opt, uint64_t fingerprint, const TierRecordShape& shape);
  void write_block(const TierWriteQueue::Block& b);
  void write_segment(const TierWriteQueue::Block& b);
  // GET key from the node of `shard` on the caller's thread; a string value `accept` refuses is
  // deleted. Counts a hit, a miss, a rejection or a fallback into `stats`.
  bool get_record(uint64_t shard, const std::string& key, const std::function<bool(std::span<const uint8_t>)>& accept,
                  TierStats& stats);
  // SET NX EX of one record on the node of `shard` over `links`; counts into `stats`.
  void write_record(std::vector<std::unique_ptr<Link>>& links, uint64_t shard, const std::string& key,
                    std::span<const uint8_t> bytes, TierStats& stats);

  RedisTierOptions opt_;
  uint64_t fingerprint_;
  TierRecordShape shape_;
  std::string key_prefix_, segment_prefix_;
  std::vector<std::unique_ptr<Link>> readers_;          // used by load() and load_segment() only (the engine thread)
  std::vector<std::unique_ptr<Link>> writers_;          // used by the block writer thread only
  std::vector<std::unique_ptr<Link>> segment_writers_;  // used by the segment writer thread only
  TierStats segment_stats_;                             // under mu_
  std::unique_ptr<TierWriteQueue> segment_writes_;      // Block: hash = segment key, payload = the record
};

}  // namespace agentkv
