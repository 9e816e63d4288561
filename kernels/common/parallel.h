// Helpers for variants whose every output element is written by exactly one task: the result
// cannot depend on the thread count, only the speed does.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/common/thread_pool.h"

namespace d9m {

// Calls fn(begin, end) over [0, n) in fixed blocks of `grain`.
template <class Fn>
void parallel_blocks(ThreadPool& pool, std::size_t n, std::size_t grain, Fn&& fn) {
  const std::size_t tasks = (n + grain - 1) / grain;
  pool.parallel_for(tasks, [&](std::size_t t) { fn(t * grain, std::min(n, (t + 1) * grain)); });
}

// Calls fn(i) for i in [0, n): in order on the calling thread where `one_thread` (a serial
// reference), one task per index on the pool otherwise. For code where index i writes only what it
// owns, so both give the same bits.
template <class Fn>
void for_each_index(ThreadPool& pool, bool one_thread, std::int64_t n, Fn&& fn) {
  if (one_thread) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool.parallel_for(static_cast<std::size_t>(n), [&](std::size_t i) { fn(static_cast<std::int64_t>(i)); });
}

}  // namespace d9m
