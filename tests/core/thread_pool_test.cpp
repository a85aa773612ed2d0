// ThreadPool: every index covered once, grain-aligned chunks, repeated runs, exceptions brought
// back to the caller, chunks taken
// dynamically (a stalled helper does not hold up the rest), and pinning: one CPU per thread,
// the caller included, or all threads floating when there are more threads than CPUs.
#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/tuning.h"

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

// A job that throws on a helper or on the caller: run() returns only once every thread is done
// and rethrows it there (it would otherwise end the process in std::terminate); the pool stays
// usable.
TEST(ThreadPool, AnExceptionOnAnyThreadIsRethrownByRun) {
  ThreadPool pool(4);
  for (int thrower : {0, 2}) {
    std::atomic<int> finished{0};
    EXPECT_THROW(pool.run([&](int t, int) {
      if (t == thrower) throw std::runtime_error("job failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ++finished;
    }), std::runtime_error);
    EXPECT_EQ(finished.load(), 3) << "thrower " << thrower;
  }
  std::atomic<int> calls{0};
  pool.run([&](int, int) { ++calls; });
  EXPECT_EQ(calls.load(), 4);
}

// Helper 1 stalls in its first chunk (as if preempted); the caller takes the remaining chunks
// instead of waiting for a fixed half of the range.
TEST(ThreadPool, StalledHelperDoesNotHoldItsShare) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0}, by_helper{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {  // counts indices, not calls
    if (std::this_thread::get_id() == caller) {
      by_caller += int(e - b);
    } else {
      by_helper += int(e - b);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  EXPECT_EQ(by_caller.load() + by_helper.load(), 8);
  EXPECT_LE(by_helper.load(), 1);  // a fixed half would be 4
}

// -t N reaches the pool as its size; without one, JITLLM_CORES decides (then the core count).
TEST(ThreadPool, SizeFromArgumentOrJitllmCores) {
  EXPECT_EQ(ThreadPool(3).size(), 3);
  {
    tuning::ScopedOverride cores("JITLLM_CORES", "5");
    EXPECT_EQ(ThreadPool(0).size(), 5);
    EXPECT_EQ(ThreadPool(2).size(), 2);  // an explicit count wins
  }
  tuning::ScopedOverride unset("JITLLM_CORES", "");  // as if unset, whatever the environment says
  EXPECT_EQ(ThreadPool(0).size(), int(std::max(1u, std::thread::hardware_concurrency())));
}

std::vector<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

TEST(ThreadPool, PinsEveryThreadIncludingTheCallerOrNone) {
  // Earlier tests' pools pinned this (gtest's) thread, so its own mask says nothing now.
  const int n_cpus = int(ThreadPool::process_cpus().size());
  if (n_cpus < 2) GTEST_SKIP() << "one CPU: nothing to pin apart";
  {
    ThreadPool pool(2);
    std::vector<std::vector<int>> seen(2);
    pool.run([&](int t, int) { seen[size_t(t)] = thread_cpus(); });
    std::set<int> distinct;
    for (int t = 0; t < 2; ++t) {
      ASSERT_EQ(seen[size_t(t)].size(), 1u) << "thread " << t << " is not pinned to one CPU";
      EXPECT_EQ(seen[size_t(t)][0], pool.pinned_cpu(t));
      distinct.insert(seen[size_t(t)][0]);
    }
    EXPECT_EQ(distinct.size(), 2u) << "two threads share a CPU";
  }
  {
    // More threads than CPUs: nobody pinned, and nobody inherits the caller's single CPU.
    ThreadPool pool(n_cpus + 1);
    std::vector<size_t> n_seen(size_t(n_cpus + 1));
    pool.run([&](int t, int) { n_seen[size_t(t)] = thread_cpus().size(); });
    for (int t = 0; t <= n_cpus; ++t) {
      EXPECT_EQ(pool.pinned_cpu(t), -1);
      EXPECT_EQ(n_seen[size_t(t)], size_t(n_cpus)) << "thread " << t;
    }
  }
}

}  // namespace jitllm
