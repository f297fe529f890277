// A KV tier below RAM (disk, Redis): where KvManager sends full prefix blocks it evicts, and what it
// asks, in order, when a prefix lookup misses RAM. Every tier stores one tier record
// (kv/tier_record.h) per block, writes in the background (kv/tier_write_queue.h) and never hands
// out a record that failed a check.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "kv/tier_write_queue.h"

namespace agentkv {

struct TierStats {
  uint64_t hits = 0;          // lookups that restored a valid record
  uint64_t misses = 0;        // lookups with no usable record (absent, rejected or unreachable)
  uint64_t rejected = 0;      // records that failed a check: deleted, never used
  uint64_t fallbacks = 0;     // lookups answered as misses because the tier could not be read (down, timed out)
  uint64_t writes = 0;        // records written
  uint64_t write_drops = 0;   // blocks not written because the queue was full
  uint64_t write_errors = 0;  // writes that failed (nothing left visible), the tier being down included
  uint64_t removed = 0;       // records removed to stay within a size budget
  int64_t bytes = 0;          // bytes of this model's records in the tier, where the tier can know it
};

// The write side, the stats and the lookup of blocks still queued are the same for every tier and
// live here; a tier adds how a record is written (given to start_writer) and read (load).
class KvTier {
 public:
  virtual ~KvTier();
  // "disk", "redis": the label of the tier's /metrics samples.
  virtual const char* name() const = 0;
  // A tier several servers read (Redis): KvManager writes every exact block to it as soon as the block
  // is computed, so another server fetches it instead of prefilling. A local tier (the disk) is
  // written only when a block leaves RAM.
  virtual bool shared() const { return false; }
  // Queues the block for writing (a copy); never waits for I/O. Dropped and counted when the queue is full.
  void store(uint64_t hash, std::span<const int32_t> tokens, std::span<const uint8_t> payload);
  // Copies the payload of `hash`'s record into out when the tier holds one that passes every check
  // against these tokens (or the block still waits in the write queue); a record that fails a check
  // is deleted. Bounded time, also when the tier is down.
  virtual bool load(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) = 0;
  // Waits until every queued block is written (or failed).
  void flush();
  // flush() for at most `timeout`: false when blocks still wait then. Any thread.
  bool flush_for(std::chrono::milliseconds timeout);
  TierStats stats() const;
  // Tests hold the writer to fill the queue; stores still queue (and drop) while it is held.
  void hold_writer_for_testing(bool hold);

 protected:
  KvTier() = default;
  // Starts the writer thread: the tier's open() calls it once the tier is ready to write.
  void start_writer(int max_queued, TierWriteQueue::WriteFn write);
  // Writes what is queued and stops the writer: the first thing a tier's destructor does, while
  // everything the write function uses still exists.
  void stop_writer();
  // A block evicted moments ago may still wait for the writer: this process's own copy, no record
  // yet. Counts a hit when found.
  bool load_queued(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out);

  mutable std::mutex mu_;  // stats_, and whatever else a tier keeps with it
  TierStats stats_;

 private:
  std::unique_ptr<TierWriteQueue> writes_;
};

}  // namespace agentkv
