// A fixed pool of worker threads that runs one parallel region at a time. The forward pass splits each
// matmul / attention over rows; the calling thread takes part, so n_threads = 1 runs inline.
//
// Built to stay fast when the cores are shared (many servers or clients on one machine, more runnable
// threads than cores):
// - The pieces of a region (the indices of run(), the chunks of parallel_for) are claimed, not assigned:
//   whichever thread is running takes the next one, the caller included. A worker the OS has not yet
//   scheduled when the region starts simply finds nothing left, so a region never waits for a thread
//   to wake up, only for pieces that are actually being computed.
// - Idle workers spin briefly (a decode step issues hundreds of short regions, and waking a sleeping
//   thread costs tens of microseconds), yielding the core while they spin, then sleep on a condition
//   variable. The caller waiting for the last pieces does the same. Nothing spins unbounded.
// Which thread runs a piece never changes what the piece computes, so results stay bit-identical
// whatever the scheduling (batch-invariant kernels rely on that).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace agentkv {

class ThreadPool {
 public:
  // n_threads <= 0 means all hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(index, n_threads) once for every index in [0, n_threads) and waits for all. Indices are
  // claimed by whichever threads are running (one thread may run several, one after another), so fn
  // must not wait for another index (no barriers inside).
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into chunks of at least `grain` and calls fn(begin, end) on them in parallel.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker();
  // Claims and runs pieces of the region `generation` until none is left.
  void work_on(uint64_t generation);

  int n_threads_;
  std::vector<std::thread> threads_;
  // Region ticket: generation in the high 32 bits, next unclaimed index in the low 32.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<const std::function<void(int, int)>*> job_{nullptr};
  std::atomic<int> done_{0};  // pieces of the current region finished
  std::atomic<int> sleeping_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_start_;  // workers sleep here between regions
  std::condition_variable cv_done_;   // the caller sleeps here for the last pieces
};

}  // namespace agentkv
