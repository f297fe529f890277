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
// How long a worker spins for the next job before sleeping: long enough to bridge the gaps between
// the parallel regions of one forward pass, short enough not to burn a core when idle.
constexpr auto kSpin = std::chrono::microseconds(300);
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin, then sleep, until a new generation (job) or stop.
    auto deadline = std::chrono::steady_clock::now() + kSpin;
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_acquire)) {
      AGENTKV_CPU_RELAX();
      if (++spins % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
        std::unique_lock<std::mutex> lock(mu_);
        sleeping_.fetch_add(1);
        cv_start_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        sleeping_.fetch_sub(1);
        break;
      }
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(int, int)>* job = job_;
    (*job)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  {
    // The lock orders the generation bump against a worker that is about to sleep.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleeping_.load() > 0) cv_start_.notify_all();
  fn(0, n_threads_);
  while (pending_.load(std::memory_order_acquire) != 0) AGENTKV_CPU_RELAX();
  job_ = nullptr;
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
