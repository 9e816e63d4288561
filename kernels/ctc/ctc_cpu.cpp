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
// task per row, after its sequence's recursions) and the label terms (after their rows), each
// task waiting for the ones it reads. One loop keeps both threads inside it when the terms come:
// a separate loop of a few milliseconds for the terms is mostly over before a woken worker gets a
// core on a loaded machine, and then one thread adds everything.
//
// The terms: a task per (n, t, class c, lane), lane fastest, lane 0 taking the class's even
// occurrences in the target and lane 1 its odd ones; each task computes its terms, then adds them
// with atomic adds. On the GPU a target's positions run at once, each thread walking t, so the
// threads of one class reach a row together and contend. Of a row's terms for a class only those
// of the few positions the alignment can occupy at step t are large enough to move the sum, and
// those are neighbouring occurrences: the lanes give neighbours to different tasks, run side by
// side, that add into the same output in the same moment. (Tasks of consecutive positions keep
// neighbours on one thread; a task per position walking t, as PyTorch's threads do, reaches each
// row at a time set by the position's offset in the task order, so two threads add into it in a
// mostly fixed order.) The terms of an output are not added in ascending j even on one thread:
// this variant claims no bits.
template <class T>
void run_atomic(const KernelArgs& a, const Inputs<T>& in, const Lattice<T>& lat) {
  const Geometry& g = in.g;
  T* out = a.out<T>();
  const std::int64_t rows = g.time * g.batch, labels = g.classes - 1;
  const std::int64_t term_tasks = g.batch * g.time * labels * 2;
  // Each target's positions grouped by class, ascending within a class (a counting sort):
  // positions[n S + begin[n C + c] ...] for class c.
  std::vector<std::int64_t> begin(static_cast<std::size_t>(g.batch * (g.classes + 1)), 0);
  std::vector<std::int64_t> positions(static_cast<std::size_t>(g.batch * g.max_target));
  for (std::int64_t n = 0; n < g.batch; ++n) {
    std::int64_t* b = begin.data() + n * (g.classes + 1);
    for (std::int64_t j = 0; j < in.target_length(n); ++j) ++b[in.label(n, j) + 1];
    for (std::int64_t c = 0; c < g.classes; ++c) b[c + 1] += b[c];
    std::vector<std::int64_t> next(b, b + g.classes);
    for (std::int64_t j = 0; j < in.target_length(n); ++j)
      positions[static_cast<std::size_t>(n * g.max_target + next[static_cast<std::size_t>(in.label(n, j))]++)] = j;
  }
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
    const std::int64_t k = task - g.batch - rows, lane = k % 2, c = 1 + k / 2 % labels, t = k / (2 * labels) % g.time,
                       n = k / (2 * labels * g.time);
    if (t >= in.length(n)) return;
    const std::int64_t* b = begin.data() + n * (g.classes + 1);
    if (b[c] + lane >= b[c + 1]) return;
    wait_for(row_done[static_cast<std::size_t>(t * g.batch + n)]);
    thread_local std::vector<T> terms;
    terms.clear();
    for (std::int64_t i = b[c] + lane; i < b[c + 1]; i += 2)
      terms.push_back(label_term(in, lat, n, t, positions[static_cast<std::size_t>(n * g.max_target + i)]));
    T* target = out + in.at(t, n, c);
    for (const T& term : terms) accumulate::atomic_add(target, term);
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
                                         "threads in scheduler order, alternate occurrences of a class at one step side by side "
                                         "(PyTorch's nonblank collection kernel adds them with atomicAdd)"),
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
