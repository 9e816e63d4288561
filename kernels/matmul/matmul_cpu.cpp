// CPU variants of the matmul family: the serial reference, the same sums on every thread
// (cpu.gather), and split-K with the chunk sums added by atomics (in the scheduler's order) or in
// chunk order.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/common/thread_pool.h"
#include "kernels/matmul/matmul.h"

namespace d9m::matmul {
namespace {

// Rows of the output per task: tasks are (row block, chunk) pairs, so many chunks of one output
// are in flight at once on different threads.
constexpr std::int64_t kRowsPerTask = 4;

// Each output adds its K products in ascending k, a row of the output at a time: in order on the
// calling thread (cpu.serial), or a task per row on the pool (cpu.gather), the same bits on any
// thread count. The gather is also what computes the serial reference of a value check at model
// shapes, on every core (harness/exec/value_checker.h): BERT's and ViT's projections took 3 s each
// on one thread of this machine.
template <class T>
void by_rows(const KernelArgs& a, bool one_thread) {
  const auto& g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const T* y = a.in<T>(1);
  T* out = a.out<T>();
  for_each_index(*a.exec.pool, one_thread, g.batch * g.m, [&](std::int64_t row) {
    const std::int64_t e = row / g.m, i = row % g.m;
    for (std::int64_t j = 0; j < g.n; ++j) out[(e * g.m + i) * g.n + j] = narrow<T>(partial(g, x, y, e, i, j, 0, g.k));
  });
}

// Calls fn(e, i, chunk) for every row of every batch element and every chunk, (row block, chunk)
// pairs as the pool's tasks.
template <class F>
void for_rows_and_chunks(ThreadPool& pool, const Geometry& g, F&& fn) {
  const std::int64_t blocks = (g.batch * g.m + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(static_cast<std::size_t>(blocks * g.chunks()), [&](std::size_t task) {
    const std::int64_t block = static_cast<std::int64_t>(task) / g.chunks(), c = static_cast<std::int64_t>(task) % g.chunks();
    for (std::int64_t r = block * kRowsPerTask; r < std::min(g.batch * g.m, (block + 1) * kRowsPerTask); ++r) fn(r / g.m, r % g.m, c);
  });
}

template <class T>
void split_k(const KernelArgs& a, bool ordered) {
  using A = Acc<T>;
  const auto& g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const T* y = a.in<T>(1);
  T* out = a.out<T>();
  const std::int64_t chunks = g.chunks();
  auto chunk_sum = [&](std::int64_t e, std::int64_t i, std::int64_t j, std::int64_t c) {
    return partial(g, x, y, e, i, j, c * kSplitK, std::min(g.k, (c + 1) * kSplitK));
  };
  if (!ordered) {
    std::vector<A> acc(static_cast<std::size_t>(g.outputs()), A(0));
    for_rows_and_chunks(*a.exec.pool, g, [&](std::int64_t e, std::int64_t i, std::int64_t c) {
      for (std::int64_t j = 0; j < g.n; ++j)
        std::atomic_ref<A>(acc[static_cast<std::size_t>((e * g.m + i) * g.n + j)]).fetch_add(chunk_sum(e, i, j, c), std::memory_order_relaxed);
    });
    for (std::int64_t o = 0; o < g.outputs(); ++o) out[o] = narrow<T>(acc[static_cast<std::size_t>(o)]);
    return;
  }
  // Chunk sums in a buffer indexed by (output, chunk), then each output adds them in chunk order.
  std::vector<A> sums(static_cast<std::size_t>(g.outputs() * chunks));
  for_rows_and_chunks(*a.exec.pool, g, [&](std::int64_t e, std::int64_t i, std::int64_t c) {
    for (std::int64_t j = 0; j < g.n; ++j) sums[static_cast<std::size_t>(((e * g.m + i) * g.n + j) * chunks + c)] = chunk_sum(e, i, j, c);
  });
  for (std::int64_t o = 0; o < g.outputs(); ++o) {
    A total = 0;
    for (std::int64_t c = 0; c < chunks; ++c) total = total + sums[static_cast<std::size_t>(o * chunks + c)];
    out[o] = narrow<T>(total);
  }
}

// Split-K with chunks of chunk_by_shape(): each output's chunks in ascending order, then their
// sums in chunk order. Rows are the threads' tasks; the chunking never depends on them.
template <class T>
void split_k_by_shape(const KernelArgs& a) {
  using A = Acc<T>;
  const auto& g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const T* y = a.in<T>(1);
  T* out = a.out<T>();
  const std::int64_t len = chunk_by_shape(g.batch * g.m, g.k);
  a.exec.pool->parallel_for(static_cast<std::size_t>(g.batch * g.m), [&](std::size_t row) {
    const std::int64_t e = static_cast<std::int64_t>(row) / g.m, i = static_cast<std::int64_t>(row) % g.m;
    for (std::int64_t j = 0; j < g.n; ++j) {
      A total = 0;
      for (std::int64_t k0 = 0; k0 < g.k; k0 += len) total = total + partial(g, x, y, e, i, j, k0, std::min(g.k, k0 + len));
      out[(e * g.m + i) * g.n + j] = narrow<T>(total);
    }
  });
}

// Times both candidates on this trial's inputs, then runs the faster into the output and says
// which it was: the choice, and with it the bits, follow the machine's timing noise. Told to
// replay a choice (a framework's later calls in the same process), runs it without timing.
template <class T>
void autotune(const KernelArgs& a) {
  if (a.replay) {
    if (*a.replay == "cpu.ordered")
      split_k<T>(a, true);
    else if (*a.replay == "cpu.splitk_by_shape")
      split_k_by_shape<T>(a);
    else
      throw std::logic_error("matmul cpu.autotune was told to replay \"" + *a.replay + "\", which it never chooses");
    a.chose(*a.replay);
    return;
  }
  using Clock = std::chrono::steady_clock;
  auto timed = [&](auto&& run) {
    const auto t0 = Clock::now();
    run();
    return Clock::now() - t0;
  };
  const auto ordered = timed([&] { split_k<T>(a, true); });
  const auto by_shape = timed([&] { split_k_by_shape<T>(a); });
  if (ordered <= by_shape) {
    split_k<T>(a, true);
    a.chose("cpu.ordered");
  } else {
    split_k_by_shape<T>(a);
    a.chose("cpu.splitk_by_shape");
  }
}

std::vector<VariantDef> variants(const std::string& op) {
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread adds the K products of each output in ascending k"),
           .run = typed([](const KernelArgs& a, auto tag) { by_rows<decltype(tag)>(a, true); })},
          {.op = op, .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("a task per output row, each output adding its K products in ascending k: cpu.serial's "
                                      "bits on any thread count"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
           .run = typed([](const KernelArgs& a, auto tag) { by_rows<decltype(tag)>(a, false); }), .bit_equal_to = "cpu.serial",
           .invariance = Claim{Determinism::deterministic, ClaimSource::design, "one sum over all of K per output whatever M"}},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("split-K: chunk sums of 256 k added with atomic adds from worker threads in scheduler order"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
           .run = typed([](const KernelArgs& a, auto tag) { split_k<decltype(tag)>(a, false); })},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("split-K: chunk sums of 256 k kept apart, then added in chunk order"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
           .run = typed([](const KernelArgs& a, auto tag) { split_k<decltype(tag)>(a, true); }),
           .invariance = fixed_chunks_are_invariant()},
          {.op = op, .name = "cpu.splitk_by_shape", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("split-K into as many chunks as fill 256 tasks (fewer rows, more chunks), each added in "
                                      "order: the bits depend on the shape only, so on M too: not batch-invariant"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
           .run = typed([](const KernelArgs& a, auto tag) { split_k_by_shape<decltype(tag)>(a); }),
           .invariance = Claim{Determinism::nondeterministic, ClaimSource::design, "the chunk count follows M"}},
          {.op = op, .name = "cpu.autotune", .backend = Backend::cpu, .role = Role::autotune,
           .claim = op::nondeterministic("times cpu.ordered and cpu.splitk_by_shape afresh each trial and keeps the faster's "
                                         "output: the bits follow the timing"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
           .run = typed([](const KernelArgs& a, auto tag) { autotune<decltype(tag)>(a); })}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("matmul"));
D9M_REGISTER_VARIANTS(variants("matmul_batched"));

}  // namespace d9m::matmul
