#include "kv/kv_tier.h"

#include "util/status.h"

namespace agentkv {

KvTier::~KvTier() { AGENTKV_CHECK(!writes_ && "a tier's destructor stops its writer first (stop_writer)"); }

void KvTier::start_writer(int max_queued, TierWriteQueue::WriteFn write) {
  writes_ = std::make_unique<TierWriteQueue>(max_queued, std::move(write));
}

void KvTier::stop_writer() { writes_.reset(); }

void KvTier::store(uint64_t hash, std::span<const int32_t> tokens, std::span<const uint8_t> payload) {
  if (writes_->push(hash, tokens, payload)) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.write_drops;
}

bool KvTier::load_queued(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) {
  if (!writes_->copy_queued(hash, tokens, out)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hits;
  return true;
}

void KvTier::flush() { writes_->flush(); }

bool KvTier::flush_for(std::chrono::milliseconds timeout) { return writes_->flush_for(timeout); }

TierStats KvTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void KvTier::hold_writer_for_testing(bool hold) { writes_->hold_for_testing(hold); }

}  // namespace agentkv
