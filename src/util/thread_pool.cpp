#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AGENTKV_CPU_RELAX() _mm_pause()
#else
#define AGENTKV_CPU_RELAX() std::this_thread::yield()
#endif

namespace agentkv {

namespace {
// How long a thread spins for the next region (or for the last pieces of one) before it sleeps: long
// enough to bridge the gaps between the regions of one forward pass, short enough not to hold a core
// that another runnable thread wants. Spinning yields the core every few microseconds meanwhile.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr int kPausesPerCheck = 64;

uint64_t generation_of(uint64_t ticket) { return ticket >> 32; }

// Spins until done() or kSpin has passed, yielding between bursts of pauses. True when done() held.
template <class Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int spins = 1;; ++spins) {
    if (done()) return true;
    AGENTKV_CPU_RELAX();
    if (spins % kPausesPerCheck == 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker() {
  uint64_t seen = generation_of(ticket_.load(std::memory_order_acquire));
  for (;;) {
    auto new_region = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_of(ticket_.load(std::memory_order_acquire)) != seen;
    };
    if (!spin_until(new_region)) {
      std::unique_lock<std::mutex> lock(mu_);
      sleeping_.fetch_add(1);
      cv_start_.wait(lock, new_region);
      sleeping_.fetch_sub(1);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_of(ticket_.load(std::memory_order_acquire));
    work_on(seen);
  }
}

void ThreadPool::work_on(uint64_t generation) {
  const uint32_t n = static_cast<uint32_t>(n_threads_);
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(t) != generation || static_cast<uint32_t>(t) >= n) return;
    // Read before the claim: job_ only changes once every piece of this region is finished, and then
    // the claim below fails because the ticket moved on.
    const std::function<void(int, int)>* job = job_.load(std::memory_order_acquire);
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    (*job)(static_cast<int>(static_cast<uint32_t>(t)), n_threads_);
    // seq_cst with the caller's caller_sleeping_ store: either it sees the count or we see it sleeping.
    if (done_.fetch_add(1) + 1 == n_threads_ && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  done_.store(0, std::memory_order_relaxed);
  job_.store(&fn, std::memory_order_relaxed);
  const uint64_t generation = (generation_of(ticket_.load(std::memory_order_relaxed)) + 1) & 0xffffffffu;
  {
    // The lock orders the new region against a worker that is about to sleep.
    std::lock_guard<std::mutex> lock(mu_);
    ticket_.store(generation << 32, std::memory_order_release);
  }
  if (sleeping_.load() > 0) cv_start_.notify_all();
  work_on(generation);
  // Every piece is claimed; wait for the ones other threads are still computing.
  auto finished = [&] { return done_.load() == n_threads_; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    cv_done_.wait(lock, finished);
    caller_sleeping_.store(false);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || max_chunks == 1) {
    fn(0, n);
    return;
  }
  // Dynamic chunking: threads pull chunks so uneven rows (e.g. causal attention) balance out.
  int64_t n_chunks = std::min<int64_t>(max_chunks, int64_t(n_threads_) * 4);
  int64_t chunk = (n + n_chunks - 1) / n_chunks;
  std::atomic<int64_t> next{0};
  run([&](int, int) {
    for (;;) {
      int64_t b = next.fetch_add(chunk);
      if (b >= n) break;
      fn(b, std::min(n, b + chunk));
    }
  });
}

}  // namespace agentkv
