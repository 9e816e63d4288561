#include "kernels/common/thread_pool.h"

namespace d9m {

ThreadPool::ThreadPool(unsigned threads) {
  const unsigned extra = threads > 1 ? threads - 1 : 0;
  workers_.reserve(extra);
  for (unsigned i = 0; i < extra; ++i) workers_.emplace_back([this] { work_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(const std::function<void(std::size_t)>& fn, std::size_t tasks) {
  for (;;) {
    const std::size_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks) return;
    try {
      fn(task);
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(tasks, std::memory_order_relaxed);  // hand out no further task
    }
  }
}

// Every worker checks in once per generation, even when it found no task left, so no worker
// can still be inside an old loop when the next one starts.
void ThreadPool::work_loop() {
  std::size_t seen = 0;
  for (;;) {
    const std::function<void(std::size_t)>* job;
    std::size_t tasks;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      tasks = tasks_;
    }
    drain(*job, tasks);
    bool last;
    {
      std::lock_guard lock(mu_);
      last = ++checked_in_ == workers_.size();
    }
    if (last) done_.notify_one();
  }
}

void ThreadPool::parallel_for(std::size_t tasks, const std::function<void(std::size_t)>& fn) {
  if (tasks == 0) return;
  if (workers_.empty() || tasks == 1) {
    for (std::size_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    checked_in_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  drain(fn, tasks);
  std::exception_ptr error;
  {
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return checked_in_ == workers_.size(); });
    job_ = nullptr;
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace d9m
