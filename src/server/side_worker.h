// SideWorker: one persistent thread that runs one task at a time beside its owner's thread, so
// the scheduler can stream the last step's text while the engine runs the next step (the overlap
// vLLM's async scheduling and SGLang's overlap scheduler make). A thread kept for the server's
// life: starting one per step would cost more than the work it takes off the step's path.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace jitllm::server {

class SideWorker {
 public:
  SideWorker() : thread_([this] { run(); }) {}
  ~SideWorker() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  SideWorker(const SideWorker&) = delete;
  SideWorker& operator=(const SideWorker&) = delete;

  // Runs `task` on the worker; the previous task must have been waited for.
  void start(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      task_ = std::move(task);
      busy_ = true;
    }
    cv_.notify_all();
  }
  // Blocks until the started task (if any) is done; rethrows what it threw.
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !busy_; });
    if (std::exception_ptr e = std::exchange(fault_, nullptr)) std::rethrow_exception(e);
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return quit_ || task_; });
      if (quit_) return;
      std::function<void()> task = std::move(task_);
      task_ = nullptr;
      lock.unlock();
      std::exception_ptr fault;
      try {
        task();
      } catch (...) {
        fault = std::current_exception();
      }
      lock.lock();
      fault_ = fault;
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> task_;
  std::exception_ptr fault_;
  bool busy_ = false, quit_ = false;
  std::thread thread_;  // last: it starts after the members it reads
};

}  // namespace jitllm::server
