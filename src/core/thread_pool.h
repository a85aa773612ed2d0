// A pool of persistent worker threads for data-parallel loops (rows of a matmul, heads of
// attention). The calling thread takes part as worker 0, so a pool of N threads uses N-1 helpers.
// Threads are pinned one per CPU the process may use, the caller included (to the first allowed
// CPU, on its first run()), when there are enough CPUs; JITLLM_PIN=0 leaves them all floating.
// Pinning both sides matters: a floating caller can land on its own helper's CPU and the two
// then take turns on one core (timings bimodal by 2x). Workers spin for a short while after each
// job so the next one (decode issues hundreds per token) starts without a wake-up, then park on
// a condition variable; the caller spins for its helpers only briefly before yielding, so a
// preempted helper (a shared box) costs a time slice, not a spinning core.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
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
  // done. Not reentrant: fn must not call run() on the same pool. An exception thrown by fn on
  // any thread is rethrown here once every thread has finished (the first one, if several).
  void run(const std::function<void(int thread_index, int n_threads)>& fn);

  // Splits [0, n) into contiguous chunks (multiples of `grain`, except the last) and calls
  // fn(begin, end) for each chunk on the pool. Chunks are handed out from a shared counter (up to
  // 4 per thread), so a thread that is slowed down or preempted takes fewer of them. A grain
  // that covers whole 64-byte lines of the output keeps threads off each other's lines.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The CPU thread i is pinned to, or -1 (not pinned). Thread 0 is the caller.
  int pinned_cpu(int thread_index) const;
  // The CPUs the process was allowed when the first pool was made (what pools pin to).
  static const std::vector<int>& process_cpus();

  // The process-wide pool used when a caller does not bring its own.
  static ThreadPool& global();
  // Resizes the global pool (from -t / JITLLM_CORES); call before first use.
  static void set_global_threads(int n_threads);

 private:
  void worker_loop(int index);
  void keep_error(std::exception_ptr e);
  void pin_caller();

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::vector<int> cpus_;  // CPUs to pin worker i to (cpus_[i]); empty: no pinning
  uint64_t id_;            // unique per pool (the caller is pinned once per pool it runs)
  std::mutex mutex_;
  std::condition_variable start_cv_;
  const std::function<void(int, int)>* job_ = nullptr;
  // Each on its own cache line: workers poll generation_ while the caller polls pending_.
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  alignas(64) std::atomic<int64_t> next_chunk_{0};  // parallel_for's shared chunk counter
  std::mutex error_mutex_;
  std::exception_ptr error_;  // the job's first exception, rethrown by run()
};

}  // namespace jitllm
