// ThreadPool: persistent pinned workers that spin briefly between jobs, then park.
#include "core/thread_pool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

namespace jitllm {

namespace {

// How long an idle worker polls for the next job before parking: long enough to cover the gap
// between two ops of one decode step, short enough not to burn a core between requests.
constexpr auto kSpinTime = std::chrono::microseconds(200);

int default_threads() {
  if (const char* env = std::getenv("JITLLM_CORES")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::unique_ptr<ThreadPool>& global_pool() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_threads()) {
  const char* pin = std::getenv("JITLLM_PIN");
  if (!(pin && std::string(pin) == "0")) {
    std::vector<int> cpus = allowed_cpus();
    // Worker i takes the i-th allowed CPU; the caller (worker 0) keeps its own affinity.
    if (int(cpus.size()) >= n_threads_) cpus_ = std::move(cpus);
  }
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
  if (!cpus_.empty()) pin_to(cpus_[size_t(index)]);
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
    (*job_)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex, so a worker about to park either sees the new generation or is counted.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load() > 0) start_cv_.notify_all();
  fn(0, n_threads_);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    _mm_pause();
    if (spins > 100000) std::this_thread::yield();  // a helper was descheduled
  }
  job_ = nullptr;
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
  run([&](int t, int) {
    if (t >= threads) return;
    const int64_t first = n_chunks * t / threads, last = n_chunks * (t + 1) / threads;
    const int64_t begin = first * grain, end = std::min(n, last * grain);
    if (begin < end) fn(begin, end);
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
