#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace agentkv
