// CPU variants of ctc_loss_bwd (ctc.h): the recursions per sequence, then the rows gathered in the
// reference order (serial, ordered) or initialised and then added to with atomics (atomic).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/ctc/ctc.h"

namespace d9m::ctc {
namespace {

enum class Collect { serial, atomic, ordered };

// Runs fn(i) for i in [0, n): on one thread for the reference, on the pool otherwise. Every use
// writes what index i owns, so the two give the same bits.
template <class F>
void for_each(const KernelArgs& a, bool one_thread, std::int64_t n, F&& fn) {
  if (one_thread) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  a.exec.pool->parallel_for(static_cast<std::size_t>(n), [&](std::size_t i) { fn(static_cast<std::int64_t>(i)); });
}

template <class T>
void run(const KernelArgs& a, Collect how) {
  const auto& g = a.problem.geom<Geometry>();
  const Inputs<T> in{g, a.in<T>(0), a.in<std::int32_t>(1), a.in<std::int32_t>(2), a.in<std::int32_t>(3), a.in<T>(4)};
  const auto lattice_size = static_cast<std::size_t>(g.batch * g.time * g.states());
  std::vector<T> alpha(lattice_size), beta(lattice_size), nll(static_cast<std::size_t>(g.batch));
  const Lattice<T> lat{alpha.data(), beta.data(), nll.data()};
  const bool one_thread = how == Collect::serial;
  T* out = a.out<T>();
  for_each(a, one_thread, g.batch, [&](std::int64_t n) { sequence_lattice(in, lat, n); });
  const std::int64_t rows = g.time * g.batch;
  if (how != Collect::atomic) {
    for_each(a, one_thread, rows, [&](std::int64_t r) { gather_row(in, lat, r % g.batch, r / g.batch, out); });
    return;
  }
  for_each(a, false, rows, [&](std::int64_t r) { init_row(in, lat, r % g.batch, r / g.batch, out); });
  // The label terms, a source per (n, t, j) with j fastest, in tasks of kAtomicGrain sources that
  // compute their terms, then add them with atomic adds. On the GPU all of a target's positions run
  // at once, each thread walking t, so the threads of one class reach a row together and contend;
  // CPU tasks of positions walking t (PyTorch's decomposition) would reach a row at times set by
  // their offsets, far apart and mostly in one order. Tasks per step put the tasks that share a
  // row side by side, and the burst of adds after the exps makes two tasks' adds meet. Measured on
  // a 2-core VM under load: it races where many terms share an output (64 per output at C = 3,
  // S = 128: ND in 12 to 14 of 20 trials); a trial spends most of its time in the recursions, so a
  // config with few repeats per class may read D there. The terms of one output still come in
  // ascending j among sources, as the reference adds them.
  const std::int64_t sources = g.batch * g.time * g.max_target;
  const std::int64_t tasks = (sources + accumulate::kAtomicGrain - 1) / accumulate::kAtomicGrain;
  for_each(a, false, tasks, [&](std::int64_t task) {
    T term[accumulate::kAtomicGrain];
    std::int64_t target[accumulate::kAtomicGrain], count = 0;
    const std::int64_t end = std::min(sources, (task + 1) * static_cast<std::int64_t>(accumulate::kAtomicGrain));
    for (std::int64_t i = task * static_cast<std::int64_t>(accumulate::kAtomicGrain); i < end; ++i) {
      const std::int64_t j = i % g.max_target, t = i / g.max_target % g.time, n = i / (g.max_target * g.time);
      if (j >= in.target_length(n) || t >= in.length(n)) continue;
      target[count] = in.at(t, n, in.label(n, j));
      term[count++] = label_term(in, lat, n, t, j);
    }
    for (std::int64_t k = 0; k < count; ++k) accumulate::atomic_add(out + target[k], term[k]);
  });
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
