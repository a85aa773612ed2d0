#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace jitllm {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000, 1001}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, ChunksAreMultiplesOfGrain) {
  ThreadPool pool(2);
  std::atomic<int> bad{0};
  pool.parallel_for(100, 16, [&](int64_t b, int64_t e) {
    if (b % 16 != 0 || (e != 100 && e % 16 != 0)) bad++;
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(ThreadPool, RunCallsEveryThreadRepeatedly) {
  ThreadPool pool(4);
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> mask{0};
    pool.run([&](int t, int n) {
      EXPECT_EQ(n, 4);
      mask |= 1 << t;
    });
    ASSERT_EQ(mask.load(), 0xf);
  }
}

}  // namespace jitllm
