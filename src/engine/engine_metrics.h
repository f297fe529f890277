// Counters and gauges of one engine, read by bench-agents and exported by the server's /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kv/kv_tier.h"

namespace agentkv {

// Cumulative histogram with fixed bucket bounds (seconds), Prometheus style.
class LatencyHistogram {
 public:
  LatencyHistogram();
  void observe(double seconds);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // per bucket, not cumulative; last = +Inf
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct EngineMetrics {
  // Counters.
  uint64_t requests_added = 0;
  uint64_t requests_finished = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_failed = 0;
  uint64_t prefix_query_tokens = 0;   // prompt tokens looked up in the prefix cache at admission
  uint64_t prefix_hit_tokens = 0;     // of those, reused from cached blocks
  uint64_t prefix_query_blocks = 0;
  uint64_t prefix_hit_blocks = 0;
  uint64_t tokens_prefilled = 0;      // tokens computed without sampling from them (prompt / recompute)
  uint64_t tokens_decoded = 0;        // tokens sampled
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  double forward_seconds = 0;
  double prefill_seconds = 0;         // forward time attributed to prefill tokens (by token share)
  // Collective sharing in chat traffic (engine/chat_sharing.h).
  uint64_t segment_lookups = 0;       // message segments looked up in the segment cache
  uint64_t segment_hit_tokens = 0;    // tokens of those found with KV
  uint64_t tokens_reused_approx = 0;  // prompt tokens whose KV was reused approximately, not recomputed
  uint64_t tokens_recomputed = 0;     // tokens selectively recomputed (through every layer)
  uint64_t segment_blends = 0;        // requests' runs of segments blended from a master
  uint64_t segment_blend_steps = 0;   // collective steps they took (blends of one step and master share one)
  // Echoes (EngineOptions::echo_keep): tokens of agents' own earlier text that compaction stored as a
  // shared block's master rows plus a share of diff rows, in whole blocks dropped from their contexts.
  uint64_t echo_tokens = 0;
  // Cross-model KV transfers into this engine (POST /v1/agents/{id}/transfer): contexts made, and
  // their tokens whose K/V was projected from the sender's cache (the rest were computed here).
  uint64_t transfers = 0;
  uint64_t transferred_tokens = 0;
  // Constrained decoding (engine/grammar_matcher.h): tokens sampled under a grammar and the time the
  // grammar took for them (masks, checks, advancing).
  uint64_t grammar_tokens = 0;
  double grammar_seconds = 0;
  // Gauges.
  int64_t blocks_total = 0;
  int64_t blocks_used = 0;
  int64_t blocks_pinned = 0;  // held by resident contexts only: what admission cannot reclaim (kv_budget)
  int64_t blocks_free = 0;
  int64_t blocks_cached = 0;
  int64_t blocks_peak_used = 0;
  int64_t bytes_per_block = 0;
  int64_t requests_running = 0;
  int64_t requests_waiting = 0;
  int64_t retained_snapshots = 0;     // resident contexts (agents' pinned KV)
  int64_t retained_tokens = 0;
  int64_t retained_compact = 0;         // of those, in master–diff form
  int64_t retained_compact_blocks = 0;  // blocks they hold on their own (diff rows, own turns)
  int64_t retained_diff_blocks = 0;     // of those, the blocks of their diff rows
  int64_t retained_diff_bytes = 0;      // the diff rows' records (kv/kv_diff_codec.h), not rounded to blocks
  int64_t segment_contexts = 0;         // contexts in the segment cache (masters of chat sharing)
  int64_t segment_blocks = 0;           // distinct blocks they reference
  int64_t segment_compact = 0;          // of those contexts, in master–diff form
  int64_t segment_diff_blocks = 0;      // blocks their diff rows take
  // The KV tiers below RAM (all zero when off).
  TierStats disk_tier;
  TierStats redis_tier;
  TierStats redis_segments;  // chat-sharing segment masters' index records in Redis
  // Latencies.
  LatencyHistogram ttft;
  LatencyHistogram inter_token;
};

}  // namespace agentkv
