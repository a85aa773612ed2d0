// ThreadPool: persistent pinned workers that spin briefly between jobs, then park.
#include "core/thread_pool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/tuning.h"

namespace jitllm {

namespace {

// How long an idle worker polls for the next job before parking: long enough to cover the gap
// between two ops of one decode step, short enough not to burn a core between requests.
constexpr auto kSpinTime = std::chrono::microseconds(200);
// How long the caller polls for its helpers before it starts yielding its core: far more than the
// imbalance of a normal job (a few us), far less than a scheduler time slice (ms).
constexpr auto kCallerSpinTime = std::chrono::microseconds(50);

// Which pool (ThreadPool::id_) this thread was last pinned for as a caller (so run() pins once,
// not per job).
thread_local uint64_t t_pinned_for = 0;
std::atomic<uint64_t> g_next_pool_id{1};

int default_threads() {
  if (const int n = tuning::core_knobs().cores.get(); n > 0) return n;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::unique_ptr<ThreadPool>& global_pool() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}

std::vector<int> read_thread_cpus() {
  std::vector<int> c;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) c.push_back(i);
  return c;
}
const std::vector<int>& process_cpus() { return ThreadPool::process_cpus(); }

// Pins the calling thread to `cpu`, or (cpu < 0) lets it float over all of process_cpus(): a
// thread created by a pinned caller inherits that one CPU otherwise.
void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu >= 0) {
    CPU_SET(cpu, &set);
  } else {
    if (process_cpus().empty()) return;
    for (int c : process_cpus()) CPU_SET(c, &set);
  }
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads > 0 ? n_threads : default_threads()), id_(g_next_pool_id++) {
  // Thread i takes the i-th allowed CPU; the caller (thread 0) the first, when it first runs.
  if (tuning::core_knobs().pin.on() && int(process_cpus().size()) >= n_threads_)
    cpus_ = process_cpus();
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  pin_to(pinned_cpu(index));
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto until = std::chrono::steady_clock::now() + kSpinTime;
      for (int spins = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++spins) {
        if (stopping_.load(std::memory_order_relaxed)) return;
        _mm_pause();
        if ((spins & 255) == 255 && std::chrono::steady_clock::now() > until) {
          std::unique_lock lock(mutex_);
          sleepers_.fetch_add(1);
          start_cv_.wait(lock, [&] {
            return stopping_.load() || generation_.load(std::memory_order_acquire) != seen;
          });
          sleepers_.fetch_sub(1);
        }
      }
    }
    if (stopping_.load()) return;
    seen = g;
    try {
      (*job_)(index, n_threads_);
    } catch (...) {
      keep_error(std::current_exception());
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// Read once, before any pool pins a thread: a pinned caller's own mask would otherwise shrink
// the next pool to its one CPU.
const std::vector<int>& ThreadPool::process_cpus() {
  static const std::vector<int> cpus = read_thread_cpus();
  return cpus;
}

int ThreadPool::pinned_cpu(int thread_index) const {
  if (cpus_.empty() || thread_index < 0 || thread_index >= n_threads_) return -1;
  return cpus_[size_t(thread_index)];
}

void ThreadPool::pin_caller() {
  if (t_pinned_for == id_) return;
  t_pinned_for = id_;
  pin_to(pinned_cpu(0));
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  pin_caller();
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex, so a worker about to park either sees the new generation or is counted.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load() > 0) start_cv_.notify_all();
  try {
    fn(0, n_threads_);
  } catch (...) {
    keep_error(std::current_exception());  // the helpers still run the job: wait for them
  }
  if (pending_.load(std::memory_order_acquire) != 0) {
    const auto until = std::chrono::steady_clock::now() + kCallerSpinTime;
    bool yielding = false;
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (yielding) {
        std::this_thread::yield();  // a helper was preempted: let whoever has the core run
      } else {
        _mm_pause();
        if ((spins & 63) == 63 && std::chrono::steady_clock::now() > until) yielding = true;
      }
    }
  }
  job_ = nullptr;
  if (error_) {
    std::exception_ptr e;
    std::swap(e, error_);
    std::rethrow_exception(e);
  }
}

void ThreadPool::keep_error(std::exception_ptr e) {
  std::lock_guard lock(error_mutex_);
  if (!error_) error_ = std::move(e);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n_chunks = (n + grain - 1) / grain;
  const int threads = int(std::min<int64_t>(n_threads_, n_chunks));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  // Up to 4 pieces per thread, each a whole number of grains, taken from a shared counter.
  const int64_t pieces = std::min<int64_t>(n_chunks, int64_t(threads) * 4);
  next_chunk_.store(0, std::memory_order_relaxed);
  run([&](int, int) {
    for (;;) {
      const int64_t i = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (i >= pieces) return;
      const int64_t begin = n_chunks * i / pieces * grain;
      const int64_t end = std::min(n, n_chunks * (i + 1) / pieces * grain);
      if (begin < end) fn(begin, end);
    }
  });
}

ThreadPool& ThreadPool::global() {
  auto& pool = global_pool();
  if (!pool) pool = std::make_unique<ThreadPool>();
  return *pool;
}

void ThreadPool::set_global_threads(int n_threads) {
  global_pool() = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace jitllm
