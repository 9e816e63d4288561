// CPU variants of the attention family (attention.h): the serial reference of both ops, the
// backward with the serial sums on every thread (cpu.gather), and the backward with dQ's key-block
// partials added by atomics (scheduler order) or in block order.
#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/common/thread_pool.h"

namespace d9m::attention {
namespace {

// Rows are independent: on worker threads they give the serial bits (nothing is split).
template <class T>
void forward(const KernelArgs& a, bool serial) {
  const auto& g = a.problem.geom<Geometry>();
  for_each_index(*a.exec.pool, serial, g.rows(), [&](std::int64_t r) {
    std::vector<Acc<T>> acc(static_cast<std::size_t>(g.dim));
    forward_row(g, a.in<T>(0), a.in<T>(1), a.in<T>(2), r / g.seq_q, r % g.seq_q, acc.data(), a.out<T>() + r * g.dim);
  });
}

// How dQ is summed over the keys: in one pass per query in ascending key order (serial: on one
// thread, as every phase; gather: a task per query row, every phase on the worker threads, the
// same bits), or in partials over blocks of keys, added by atomics or in block order.
enum class DqSum { serial, gather, atomic, ordered };

template <class T>
void backward(const KernelArgs& a, DqSum how) {
  using A = Acc<T>;
  const auto& g = a.problem.geom<Geometry>();
  const T *q = a.in<T>(0), *k = a.in<T>(1), *v = a.in<T>(2), *d_out = a.in<T>(3);
  T* out = a.out<T>();
  const bool one_thread = how == DqSum::serial;

  // The forward, row by row: statistics, O (in T, as it would be stored) and delta.
  std::vector<RowStats<A>> stats(static_cast<std::size_t>(g.rows()));
  std::vector<A> deltas(static_cast<std::size_t>(g.rows()));
  std::vector<T> o(static_cast<std::size_t>(g.rows() * g.dim));
  for_each_index(*a.exec.pool, one_thread, g.rows(), [&](std::int64_t r) {
    std::vector<A> acc(static_cast<std::size_t>(g.dim));
    T* o_row = o.data() + r * g.dim;
    stats[static_cast<std::size_t>(r)] = forward_row(g, q, k, v, r / g.seq_q, r % g.seq_q, acc.data(), o_row);
    deltas[static_cast<std::size_t>(r)] = delta(g, d_out, o_row, r / g.seq_q, r % g.seq_q);
  });

  // P and dS of every unmasked pair.
  std::vector<A> p(static_cast<std::size_t>(g.rows() * g.seq_kv)), ds(p.size());
  for_each_index(*a.exec.pool, one_thread, g.rows(), [&](std::int64_t r) {
    const std::int64_t bh = r / g.seq_q, i = r % g.seq_q;
    for (std::int64_t j = 0; j < g.keys_for(i); ++j) {
      const std::int64_t at = pair_at(g, bh, i, j);
      pair_grad(g, q, k, v, d_out, stats[static_cast<std::size_t>(r)], deltas[static_cast<std::size_t>(r)], bh, i, j,
                p[static_cast<std::size_t>(at)], ds[static_cast<std::size_t>(at)]);
    }
  });

  // dK and dV, one key at a time.
  for_each_index(*a.exec.pool, one_thread, g.key_rows(), [&](std::int64_t r) {
    for (std::int64_t d = 0; d < g.dim; ++d) key_grads(g, p.data(), ds.data(), q, d_out, r / g.seq_kv, r % g.seq_kv, d, out);
  });

  // dQ.
  const A scale = static_cast<A>(g.scale);
  if (how == DqSum::serial || how == DqSum::gather) {
    for_each_index(*a.exec.pool, one_thread, g.rows(), [&](std::int64_t r) {
      for (std::int64_t d = 0; d < g.dim; ++d)
        out[dq_at(g, r / g.seq_q, r % g.seq_q, d)] = narrow<T>(dq_partial(g, ds.data(), k, r / g.seq_q, r % g.seq_q, d, 0, g.seq_kv) * scale);
    });
    return;
  }
  // One task per (head, key block), as a flash-attention backward's thread blocks: the block's
  // partial dQ of every query, added into an accumulator (atomic) or kept apart (ordered).
  const std::int64_t blocks = g.key_blocks();
  std::vector<A> acc(static_cast<std::size_t>(g.rows() * g.dim * (how == DqSum::atomic ? 1 : blocks)), A(0));
  a.exec.pool->parallel_for(static_cast<std::size_t>(g.heads_total() * blocks), [&](std::size_t task) {
    const std::int64_t bh = static_cast<std::int64_t>(task) / blocks, kb = static_cast<std::int64_t>(task) % blocks;
    for (std::int64_t i = 0; i < g.seq_q; ++i)
      for (std::int64_t d = 0; d < g.dim; ++d) {
        const A part = dq_partial(g, ds.data(), k, bh, i, d, kb * kKeyBlock, (kb + 1) * kKeyBlock);
        const std::int64_t x = (bh * g.seq_q + i) * g.dim + d;
        if (how == DqSum::atomic) std::atomic_ref<A>(acc[static_cast<std::size_t>(x)]).fetch_add(part, std::memory_order_relaxed);
        else acc[static_cast<std::size_t>(x * blocks + kb)] = part;
      }
  });
  for (std::int64_t x = 0; x < g.rows() * g.dim; ++x) {
    A total = 0;
    if (how == DqSum::atomic) total = acc[static_cast<std::size_t>(x)];
    else
      for (std::int64_t kb = 0; kb < blocks; ++kb) total = total + acc[static_cast<std::size_t>(x * blocks + kb)];
    const std::int64_t r = x / g.dim;
    out[dq_at(g, r / g.seq_q, r % g.seq_q, x % g.dim)] = narrow<T>(total * scale);
  }
}

std::vector<VariantDef> variants() {
  return {{.op = "sdpa", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread: each row's scores, softmax and weighted sum of v in ascending key order"),
           .run = typed([](const KernelArgs& a, auto tag) { forward<decltype(tag)>(a, true); })},
          {.op = "sdpa", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("one task per query row on the worker threads, each as cpu.serial computes it"),
           .run = typed([](const KernelArgs& a, auto tag) { forward<decltype(tag)>(a, false); }),
           .bit_equal_to = "cpu.serial",
           .invariance = op::deterministic("every sum runs over one sequence's keys: no row sees the batch")},
          {.op = "sdpa_bwd", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread: the forward, then dV, dK and dQ each summed in ascending index"),
           .run = typed([](const KernelArgs& a, auto tag) { backward<decltype(tag)>(a, DqSum::serial); })},
          {.op = "sdpa_bwd", .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("every phase a task per query or key row, dQ a task per query row summing over all keys "
                                      "in ascending order: cpu.serial's bits on any thread count"),
           .run = typed([](const KernelArgs& a, auto tag) { backward<decltype(tag)>(a, DqSum::gather); }),
           .bit_equal_to = "cpu.serial",
           .invariance = op::deterministic("every sum runs over one sequence's keys or queries: no row sees the batch")},
          {.op = "sdpa_bwd", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("dQ's partial sums over blocks of 64 keys added with atomic adds from worker threads "
                                         "in scheduler order (a flash-attention backward's dQ)"),
           .run = typed([](const KernelArgs& a, auto tag) { backward<decltype(tag)>(a, DqSum::atomic); })},
          {.op = "sdpa_bwd", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("dQ's partial sums over blocks of 64 keys kept apart, then added in block order"),
           .run = typed([](const KernelArgs& a, auto tag) { backward<decltype(tag)>(a, DqSum::ordered); }),
           .invariance = op::deterministic("every sum runs over one sequence's keys or queries: no row sees the batch")}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::attention
