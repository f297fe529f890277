// A fixed pool of worker threads that runs one parallel-for at a time. The forward pass splits each
// matmul / attention over rows; the calling thread takes part, so n_threads = 1 runs inline.
// A decode step issues hundreds of short parallel regions, so workers spin briefly on an atomic
// before sleeping on a condition variable: waking a sleeping thread costs tens of microseconds.
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

  // Runs fn(thread_index, n_threads) on every thread (the caller is index 0) and waits for all.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into chunks of at least `grain` and calls fn(begin, end) on them in parallel.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_start_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace agentkv
