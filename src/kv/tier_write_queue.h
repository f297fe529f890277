// The write side every lower KV tier shares: a bounded queue of blocks evicted from RAM and one
// background thread that hands them, oldest first, to the tier's write function. The engine thread
// only copies a block in (or is told the queue is full, and drops it), so a slow or dead tier never
// stalls a decode step. A block still waiting here can be read back (copy_queued), so a prompt
// repeated right after its blocks were evicted restores them before they reach the tier.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace agentkv {

class TierWriteQueue {
 public:
  struct Block {
    uint64_t hash;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> payload;
  };
  using WriteFn = std::function<void(const Block&)>;

  // Starts the writer thread, which calls write (on that thread) for each queued block.
  TierWriteQueue(int max_queued, WriteFn write);
  // Writes what is queued, then stops the writer.
  ~TierWriteQueue();
  TierWriteQueue(const TierWriteQueue&) = delete;
  TierWriteQueue& operator=(const TierWriteQueue&) = delete;

  // Queues a copy of the block; false (nothing queued) when max_queued blocks already wait.
  bool push(uint64_t hash, std::span<const int32_t> tokens, std::span<const uint8_t> payload);
  // Copies the payload of a queued block with this hash and these tokens into out.
  bool copy_queued(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) const;
  // Waits until the queue is empty and nothing is being written.
  void flush();
  // flush() for at most `timeout`: false when blocks still wait then.
  bool flush_for(std::chrono::milliseconds timeout);
  // Tests hold the writer to fill the queue; pushes still queue (and fail when full) while it is held.
  void hold_for_testing(bool hold);

 private:
  void run();

  const size_t max_queued_;
  const WriteFn write_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Block> queue_;
  bool writing_ = false;
  bool stop_ = false;
  bool held_ = false;
  std::thread writer_;  // last: started once everything above exists
};

}  // namespace agentkv
