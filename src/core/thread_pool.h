// A pool of persistent worker threads for data-parallel loops (rows of a matmul, heads of
// attention). The calling thread takes part as worker 0, so a pool of N threads uses N-1 helpers.
// Workers are pinned to the CPUs the process may use (one each, when there are enough; set
// JITLLM_PIN=0 to leave them floating), spin for a short while after each job so the next one
// (decode issues hundreds per token) starts without a wake-up, then park on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jitllm {

class ThreadPool {
 public:
  // n_threads <= 0 picks the number of hardware threads (or JITLLM_CORES when set).
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread of the pool and returns when all are
  // done. Not reentrant: fn must not call run() on the same pool.
  void run(const std::function<void(int thread_index, int n_threads)>& fn);

  // Splits [0, n) into contiguous chunks (multiples of `grain`, except the last) and calls
  // fn(begin, end) for each chunk on the pool.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool used when a caller does not bring its own.
  static ThreadPool& global();
  // Resizes the global pool (from -t / JITLLM_CORES); call before first use.
  static void set_global_threads(int n_threads);

 private:
  void worker_loop(int index);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::vector<int> cpus_;  // CPUs to pin worker i to (cpus_[i]); empty: no pinning
  std::mutex mutex_;
  std::condition_variable start_cv_;
  const std::function<void(int, int)>* job_ = nullptr;
  // Each on its own cache line: workers poll generation_ while the caller polls pending_.
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace jitllm
