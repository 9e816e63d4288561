// A fixed set of worker threads that run one parallel loop at a time.
//
// Tasks are claimed from a shared counter, so which thread runs which task (and in what order
// tasks finish) is up to the scheduler. Ordered variants must therefore make every result a
// function of the task index alone; atomic variants deliberately do not.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace d9m {

class ThreadPool {
 public:
  // threads >= 1; the calling thread is one of them, so threads - 1 workers are started.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Runs fn(task) for every task in [0, tasks) and returns when all are done. The first
  // exception thrown by a task is rethrown here after the loop has drained.
  void parallel_for(std::size_t tasks, const std::function<void(std::size_t)>& fn);

 private:
  void work_loop();
  void drain(const std::function<void(std::size_t)>& fn, std::size_t tasks);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t tasks_ = 0;
  std::atomic<std::size_t> next_{0};
  std::size_t generation_ = 0;
  std::size_t checked_in_ = 0;  // workers done with the current generation
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace d9m
