#include "kv/tier_write_queue.h"

#include <algorithm>
#include <cstring>

#include "util/status.h"

namespace agentkv {

TierWriteQueue::TierWriteQueue(int max_queued, WriteFn write)
    : max_queued_(size_t(std::max(max_queued, 1))), write_(std::move(write)), writer_([this] { run(); }) {}

TierWriteQueue::~TierWriteQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    held_ = false;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

bool TierWriteQueue::push(uint64_t hash, std::span<const int32_t> tokens, std::span<const uint8_t> payload) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.size() >= max_queued_ || stop_) return false;
  queue_.push_back(Block{hash, {tokens.begin(), tokens.end()}, {payload.begin(), payload.end()}});
  lock.unlock();
  wake_.notify_one();
  return true;
}

bool TierWriteQueue::copy_queued(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Block& b : queue_) {
    if (b.hash != hash || !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) continue;
    AGENTKV_CHECK(b.payload.size() == out.size());
    std::memcpy(out.data(), b.payload.data(), out.size());
    return true;
  }
  return false;
}

void TierWriteQueue::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

bool TierWriteQueue::flush_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_for(lock, timeout, [this] { return queue_.empty() && !writing_; });
}

void TierWriteQueue::hold_for_testing(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = hold;
  }
  wake_.notify_all();
}

void TierWriteQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || (!queue_.empty() && !held_); });
    if (queue_.empty()) return;  // stopping, and everything queued is written
    Block b = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    write_(b);
    lock.lock();
    writing_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace agentkv
