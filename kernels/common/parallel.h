// Helpers for variants whose every output element is written by exactly one task: the result
// cannot depend on the thread count, only the speed does.
#pragma once
#include <algorithm>
#include <cstddef>

#include "kernels/common/thread_pool.h"

namespace d9m {

// Calls fn(begin, end) over [0, n) in fixed blocks of `grain`.
template <class Fn>
void parallel_blocks(ThreadPool& pool, std::size_t n, std::size_t grain, Fn&& fn) {
  const std::size_t tasks = (n + grain - 1) / grain;
  pool.parallel_for(tasks, [&](std::size_t t) { fn(t * grain, std::min(n, (t + 1) * grain)); });
}

}  // namespace d9m
