// CPU variants of ctc_loss_bwd (ctc.h): the recursions per sequence, then the rows gathered in the
// reference order (serial, ordered) or initialised and then added to with atomics (atomic).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/common/thread_pool.h"
#include "kernels/ctc/ctc.h"

namespace d9m::ctc {
namespace {

enum class Collect { serial, atomic, ordered };

// Waits for a flag that a task of a smaller index sets. The pool hands out tasks in increasing
// index order, so that task is claimed and its thread makes progress: the wait ends.
void wait_for(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

// cpu.atomic in one parallel loop: the recursions (a task per sequence), the rows' base values (a
// task per row, after its sequence's recursions) and the label terms (tasks of kAtomicGrain
// (n, t, j) sources, j fastest, after their rows), each task waiting for the ones it reads. One loop
// keeps both threads inside it when the terms come: a separate loop of a few milliseconds for the
// terms is mostly over before a woken worker gets a core on a loaded machine, and then one thread
// adds everything in source order.
// A term task computes its terms, then adds them with atomic adds. On the GPU all of a target's
// positions run at once, each thread walking t, so the threads of one class reach a row together
// and contend; CPU tasks of positions walking t (PyTorch's decomposition) would reach a row at
// times set by their offsets, far apart and mostly in one order. Tasks per step put the tasks that
// share a row side by side, and the burst of adds after the exps makes two tasks' adds meet. The
// terms of one output still come in ascending j among sources, as the reference adds them.
template <class T>
void run_atomic(const KernelArgs& a, const Inputs<T>& in, const Lattice<T>& lat) {
  const Geometry& g = in.g;
  T* out = a.out<T>();
  const std::int64_t rows = g.time * g.batch, sources = rows * g.max_target;
  const auto grain = static_cast<std::int64_t>(accumulate::kAtomicGrain);
  const std::int64_t term_tasks = (sources + grain - 1) / grain;
  std::vector<std::atomic<bool>> lattice_done(static_cast<std::size_t>(g.batch)), row_done(static_cast<std::size_t>(rows));
  for_each_index(*a.exec.pool, false, g.batch + rows + term_tasks, [&](std::int64_t task) {
    if (task < g.batch) {
      sequence_lattice(in, lat, task);
      lattice_done[static_cast<std::size_t>(task)].store(true, std::memory_order_release);
      return;
    }
    if (task < g.batch + rows) {
      const std::int64_t r = task - g.batch;
      wait_for(lattice_done[static_cast<std::size_t>(r % g.batch)]);
      init_row(in, lat, r % g.batch, r / g.batch, out);
      row_done[static_cast<std::size_t>(r)].store(true, std::memory_order_release);
      return;
    }
    T term[accumulate::kAtomicGrain];
    std::int64_t target[accumulate::kAtomicGrain], count = 0;
    const std::int64_t first = (task - g.batch - rows) * grain, end = std::min(sources, first + grain);
    for (std::int64_t i = first; i < end; ++i) {
      // Source i = (n T + t) S + j.
      const std::int64_t j = i % g.max_target, t = i / g.max_target % g.time, n = i / (g.max_target * g.time);
      if (j >= in.target_length(n) || t >= in.length(n)) continue;
      wait_for(row_done[static_cast<std::size_t>(t * g.batch + n)]);
      target[count] = in.at(t, n, in.label(n, j));
      term[count++] = label_term(in, lat, n, t, j);
    }
    for (std::int64_t k = 0; k < count; ++k) accumulate::atomic_add(out + target[k], term[k]);
  });
}

template <class T>
void run(const KernelArgs& a, Collect how) {
  const auto& g = a.problem.geom<Geometry>();
  const Inputs<T> in{g, a.in<T>(0), a.in<std::int32_t>(1), a.in<std::int32_t>(2), a.in<std::int32_t>(3), a.in<T>(4)};
  const auto lattice_size = static_cast<std::size_t>(g.batch * g.time * g.states());
  std::vector<T> alpha(lattice_size), beta(lattice_size), nll(static_cast<std::size_t>(g.batch));
  const Lattice<T> lat{alpha.data(), beta.data(), nll.data()};
  if (how == Collect::atomic) return run_atomic(a, in, lat);
  const bool one_thread = how == Collect::serial;
  for_each_index(*a.exec.pool, one_thread, g.batch, [&](std::int64_t n) { sequence_lattice(in, lat, n); });
  for_each_index(*a.exec.pool, one_thread, g.time * g.batch,
                 [&](std::int64_t r) { gather_row(in, lat, r % g.batch, r / g.batch, a.out<T>()); });
}

// PyTorch's CTC runs in float and double only (OpDef::dtypes).
void dispatch(const KernelArgs& a, Collect how) {
  if (a.problem.dtype == DType::f64) run<double>(a, how);
  else run<float>(a, how);
}

std::vector<VariantDef> variants() {
  const char* op = "ctc_loss_bwd";
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread: each sequence's recursions, then each (t, n) row's base values and its label "
                                      "terms in ascending target position"),
           .run = [](const KernelArgs& a) { dispatch(a, Collect::serial); }},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("the label terms of a class that recurs in a target added with atomic adds from worker "
                                         "threads in scheduler order, tasks of 16 positions at one step (PyTorch's nonblank "
                                         "collection kernel adds them with atomicAdd)"),
           .run = [](const KernelArgs& a) { dispatch(a, Collect::atomic); }},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("one task per sequence for the recursions, then one task per (t, n) row adding its label "
                                      "terms in ascending target position"),
           .run = [](const KernelArgs& a) { dispatch(a, Collect::ordered); }, .bit_equal_to = "cpu.serial",
           .invariance = op::deterministic("every recursion and every row reads one sequence only: no row sees the batch")}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::ctc
