#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace agentkv {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  for (int rep = 0; rep < 20; ++rep) {
    pool.parallel_for(1000, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 20);
}

TEST(ThreadPool, RunGivesEachThreadItsIndex) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run([&](int i, int n) {
    EXPECT_EQ(n, 4);
    seen[i]++;
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// Far more threads than cores: most workers are not running when a region starts, and the regions
// still cover every index exactly once (late workers find their pieces claimed by others).
TEST(ThreadPool, OversubscribedRegionsRunEveryPieceOnce) {
  ThreadPool pool(32);
  std::vector<std::atomic<int>> hits(257);
  std::vector<std::atomic<int>> runs(32);
  for (int rep = 0; rep < 500; ++rep) {
    pool.parallel_for(257, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    pool.run([&](int i, int n) {
      EXPECT_EQ(n, 32);
      runs[size_t(i)]++;
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 500);
  for (auto& r : runs) EXPECT_EQ(r.load(), 500);
}

// Regions issued from two pools at once (two engines on one machine) and after long idle gaps (the
// workers asleep) all complete.
TEST(ThreadPool, PoolsSharingTheCoresAndIdleGapsComplete) {
  ThreadPool a(4), b(4);
  std::atomic<int64_t> sum_a{0}, sum_b{0};
  std::thread other([&] {
    for (int rep = 0; rep < 200; ++rep)
      b.parallel_for(1000, 10, [&](int64_t lo, int64_t hi) { sum_b += hi - lo; });
  });
  for (int rep = 0; rep < 200; ++rep) {
    a.parallel_for(1000, 10, [&](int64_t lo, int64_t hi) { sum_a += hi - lo; });
    if (rep % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  other.join();
  EXPECT_EQ(sum_a.load(), 200 * 1000);
  EXPECT_EQ(sum_b.load(), 200 * 1000);
}

}  // namespace agentkv
