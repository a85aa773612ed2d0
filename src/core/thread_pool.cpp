#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace jitllm {

namespace {

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

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_threads()) {
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
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    {
      std::unique_lock lock(mutex_);
      start_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index, n_threads_);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  fn(0, n_threads_);
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
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
