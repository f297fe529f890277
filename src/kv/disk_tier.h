// The disk tier: full KV blocks evicted from RAM kept as one tier record (kv/tier_record.h) per file
// in a directory, so a later prompt with the same prefix restores them instead of prefilling.
// Files are named by model fingerprint and chained block hash and written once (a hidden temp file,
// then link(), which never replaces an existing name), so a reader sees a whole record or none.
// Writes run on a background thread behind a bounded queue: the engine thread only copies a block
// into the queue, or drops it (counted) when the queue is full. Lookups read on the caller's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/tier_record.h"
#include "util/status.h"

namespace agentkv {

struct DiskTierOptions {
  std::string dir;
  // The most bytes of this model's records in dir; past it the oldest written are removed. 0: no limit.
  int64_t max_bytes = 0;
  int max_queued = 64;  // blocks waiting to be written; more are dropped
};

struct TierStats {
  uint64_t hits = 0;          // lookups that restored a valid record
  uint64_t misses = 0;        // lookups with no usable record (absent or rejected)
  uint64_t rejected = 0;      // records that failed a check: deleted, never used
  uint64_t writes = 0;        // records written
  uint64_t write_drops = 0;   // blocks not written because the queue was full
  uint64_t write_errors = 0;  // writes that failed (nothing left visible)
  uint64_t removed = 0;       // records removed to stay within max_bytes
  int64_t bytes = 0;          // bytes of this model's records in the directory (as this process knows them)
};

class DiskTier {
 public:
  // Creates dir if needed; an error names it when it cannot be created or written.
  static Result<std::unique_ptr<DiskTier>> open(const DiskTierOptions& opt, uint64_t fingerprint,
                                                const TierRecordShape& shape);
  // Writes what is queued, then stops the writer.
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const TierRecordShape& shape() const { return shape_; }
  // Queues the block for writing (a copy); never waits for I/O. Dropped and counted when full.
  void store(uint64_t hash, std::span<const int32_t> tokens, std::span<const uint8_t> payload);
  // Reads the record of `hash` (or takes the block from the write queue if it is still there) and,
  // when every check passes against these tokens, copies its payload into out
  // (shape().payload_bytes() bytes). A record that fails a check is deleted.
  bool load(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out);
  // Waits until every queued block is written (or failed).
  void flush();
  // Tests hold the writer to fill the queue; stores still queue (and drop) while it is held.
  void hold_writer_for_testing(bool hold);
  TierStats stats() const;
  // The file that holds (or would hold) the record of `hash`.
  std::string path_of(uint64_t hash) const;

 private:
  struct Pending {
    uint64_t hash;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> payload;
  };
  DiskTier(const DiskTierOptions& opt, uint64_t fingerprint, const TierRecordShape& shape);
  void scan_existing();
  bool load_queued(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out);
  void writer_loop();
  void write_record(const Pending& p);
  void remember(uint64_t hash, int64_t size);  // adds a record on disk to the size accounting
  void forget(uint64_t hash);                   // drops a deleted one from it
  void enforce_budget();

  DiskTierOptions opt_;
  uint64_t fingerprint_;
  TierRecordShape shape_;
  std::string name_prefix_;  // fingerprint part of every file name
  size_t read_limit_;        // one byte more than a record of this tier: a longer file is refused

  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Pending> queue_;
  bool writing_ = false;
  bool stop_ = false;
  bool held_ = false;
  // Size accounting: this model's records by hash, and (with max_bytes) the order they were written
  // in. An entry of order_ whose record was deleted or written again (another seq) is skipped.
  struct Written {
    int64_t size;
    uint64_t seq;
  };
  std::unordered_map<uint64_t, Written> written_;
  std::deque<std::pair<uint64_t, uint64_t>> order_;  // (hash, seq), oldest first
  uint64_t next_seq_ = 0;
  TierStats stats_;
  std::atomic<uint64_t> temp_seq_{0};
  std::thread writer_;
};

}  // namespace agentkv
