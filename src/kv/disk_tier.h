// The disk tier: full KV blocks evicted from RAM kept as one tier record (kv/tier_record.h) per file
// in a directory, so a later prompt with the same prefix restores them instead of prefilling.
// Files are named by model fingerprint and chained block hash and written once (a hidden temp file,
// then link(), which never replaces an existing name), so a reader sees a whole record or none.
// Writes run on a background thread behind a bounded queue (kv/tier_write_queue.h): the engine thread
// only copies a block into the queue, or drops it (counted) when the queue is full. Lookups read on
// the caller's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_tier.h"
#include "kv/tier_record.h"
#include "util/status.h"

namespace agentkv {

struct DiskTierOptions {
  std::string dir;
  // The most bytes of this model's records in dir; past it the oldest written are removed. 0: no limit.
  int64_t max_bytes = 0;
  int max_queued = 64;  // blocks waiting to be written; more are dropped
};

class DiskTier final : public KvTier {
 public:
  // Creates dir if needed; an error names it when it cannot be created or written.
  static Result<std::unique_ptr<DiskTier>> open(const DiskTierOptions& opt, uint64_t fingerprint,
                                                const TierRecordShape& shape);
  // Writes what is queued, then stops the writer.
  ~DiskTier() override;
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const char* name() const override { return "disk"; }
  const TierRecordShape& shape() const { return shape_; }
  // Reads the record of `hash` (or takes the block from the write queue if it is still there) and,
  // when every check passes against these tokens, copies its payload into out
  // (shape().payload_bytes() bytes). A record that fails a check is deleted; a file that cannot be
  // read (an I/O error, not a bad record) is a fallback and stays.
  bool load(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) override;
  // The file that holds (or would hold) the record of `hash`.
  std::string path_of(uint64_t hash) const;

 private:
  DiskTier(const DiskTierOptions& opt, uint64_t fingerprint, const TierRecordShape& shape);
  void scan_existing();
  void write_record(const TierWriteQueue::Block& p);
  void remember(uint64_t hash, int64_t size);  // adds a record on disk to the size accounting
  void forget(uint64_t hash);                   // drops a deleted one from it
  void enforce_budget();

  DiskTierOptions opt_;
  uint64_t fingerprint_;
  TierRecordShape shape_;
  std::string name_prefix_;  // fingerprint part of every file name
  size_t read_limit_;        // one byte more than a record of this tier: a longer file is refused

  // Size accounting, under mu_ (KvTier's, with stats_): this model's records by hash, and (with
  // max_bytes) the order they were written in. An entry of order_ whose record was deleted or
  // written again (another seq) is skipped.
  struct Written {
    int64_t size;
    uint64_t seq;
  };
  std::unordered_map<uint64_t, Written> written_;
  std::deque<std::pair<uint64_t, uint64_t>> order_;  // (hash, seq), oldest first
  uint64_t next_seq_ = 0;
  std::atomic<uint64_t> temp_seq_{0};
};

}  // namespace agentkv
