// CPU variants of the loss family (loss.h): the reference arrangement on one thread, the same on
// worker threads, and the atomic shapes.
#include <atomic>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/loss/loss.h"

namespace d9m::loss {
namespace {

enum class Order { serial, ordered, atomic };

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// The reduction's view of the inputs. softmax_cross_entropy's serial and ordered variants first
// gather log_softmax at every counted position's target into `gathered` (per position: the same
// values in every variant; on the worker threads but for serial); the atomic one computes each
// where its term is added.
template <class T>
Terms<T> terms_of(const KernelArgs& a, Order order, std::vector<T>& gathered) {
  const Geometry& g = a.problem.geom<Geometry>();
  Terms<T> terms{g, a.in<T>(0), nullptr, a.in<std::int32_t>(1), g.weighted ? a.in<T>(2) : nullptr};
  if (!g.logits || order == Order::atomic) return terms;
  gathered.assign(sz(g.positions()), T{});
  auto gather = [&](std::size_t begin, std::size_t end) {
    for (std::size_t p = begin; p < end; ++p) {
      const auto i = static_cast<std::int64_t>(p);
      if (terms.counts(i)) gathered[p] = log_softmax_at(g, terms.input, i, terms.target[i]);
    }
  };
  if (order == Order::serial) gather(0, gathered.size());
  else parallel_blocks(*a.exec.pool, gathered.size(), 64, gather);
  terms.gathered = gathered.data();
  return terms;
}

template <class T>
void run(const KernelArgs& a, Order order, T) {
  using A = Acc<T>;
  std::vector<T> gathered;
  const Terms<T> terms = terms_of<T>(a, order, gathered);
  const Geometry& g = terms.g;
  ThreadPool& pool = *a.exec.pool;
  T& out = a.out<T>()[0];

  if (!g.spatial()) {
    Partial<A> total;
    if (order == Order::atomic) {
      // A thread per example adds its term and weight (d9m's shape: PyTorch's [N, C] kernel has no atomics).
      parallel_blocks(pool, sz(g.n), accumulate::kAtomicGrain, [&](std::size_t begin, std::size_t end) {
        for (std::size_t p = begin; p < end; ++p) {
          const auto i = static_cast<std::int64_t>(p);
          if (!terms.counts(i)) continue;
          accumulate::atomic_add(&total.loss, A(0) - widen(terms.product(i)));
          accumulate::atomic_add(&total.weight, widen(terms.class_weight(terms.target[i])));
        }
      });
    } else {
      std::vector<Partial<A>> lanes(kLanes2d);
      if (order == Order::serial)
        for (int l = 0; l < kLanes2d; ++l) lanes[sz(l)] = lane_partial(terms, l);
      else
        pool.parallel_for(kLanes2d, [&](std::size_t l) { lanes[l] = lane_partial(terms, static_cast<int>(l)); });
      for (const auto& lane : lanes) {  // thread 0's loop, in lane order from 0
        total.loss = total.loss + lane.loss;
        total.weight = total.weight + lane.weight;
      }
    }
    out = finish_2d<T>(g.reduction, total);
    return;
  }

  Sums<T> total;
  if (order == Order::atomic) {
    // nll_loss2d: every block adds its two sums into the shared ones, in T, as it finishes.
    pool.parallel_for(sz(g.blocks()), [&](std::size_t b) {
      const Sums<T> s = block_sums(terms, static_cast<std::int64_t>(b));
      accumulate::atomic_add(&total.weight, s.weight);
      accumulate::atomic_add(&total.loss, s.loss);
    });
  } else {
    std::vector<Sums<T>> blocks(sz(g.blocks()));
    if (order == Order::serial)
      for (std::size_t b = 0; b < blocks.size(); ++b) blocks[b] = block_sums(terms, static_cast<std::int64_t>(b));
    else
      pool.parallel_for(blocks.size(), [&](std::size_t b) { blocks[b] = block_sums(terms, static_cast<std::int64_t>(b)); });
    for (const auto& s : blocks) {  // in block order
      total.loss = add(total.loss, s.loss);
      total.weight = add(total.weight, s.weight);
    }
  }
  out = finish_spatial(g.reduction, total.loss, total.weight);
}

std::vector<VariantDef> variants(const std::string& op) {
  return {
      {.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread: PyTorch's 32 lanes added in lane order ([N, C]), or nll_loss2d's block sums "
                                  "added in block order ([N, C, H, W])"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, Order::serial, t); })},
      {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::deterministic("lanes or blocks on worker threads, combined in lane or block order (bit-equal to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, Order::ordered, t); }), .bit_equal_to = "cpu.serial"},
      {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
       .claim = op::nondeterministic("atomic adds from worker threads in scheduler order: of each block's sums in T "
                                     "([N, C, H, W]), of each example's term in Acc<T> ([N, C])"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, Order::atomic, t); })},
  };
}

// softmax_cross_entropy_grad (loss.h): W on the calling thread, then the rows, in order (serial)
// or in fixed blocks on the worker threads (ordered): each row is written by one task.
template <class T>
void grad(const KernelArgs& a, bool one_thread, T) {
  const Geometry& g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const auto* target = a.in<std::int32_t>(1);
  const T* weight = g.weighted ? a.in<T>(2) : nullptr;
  const Acc<T> total = g.reduction == Reduction::mean ? counted_weight_sum(g, target, weight) : Acc<T>(1);
  T* out = a.out<T>();
  auto rows = [&](std::size_t begin, std::size_t end) {
    for (std::size_t p = begin; p < end; ++p) grad_row(g, x, target, weight, total, static_cast<std::int64_t>(p), out);
  };
  if (one_thread) rows(0, sz(g.positions()));
  else parallel_blocks(*a.exec.pool, sz(g.positions()), 16, rows);
}

std::vector<VariantDef> grad_variants() {
  const std::string op = "softmax_cross_entropy_grad";
  return {
      {.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread: the weight sum in position order, then each row (its sum in class order)"),
       .run = typed([](const KernelArgs& a, auto t) { grad(a, true, t); })},
      {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::deterministic("the weight sum in position order on one thread, then each row by one task "
                                  "(bit-equal to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto t) { grad(a, false, t); }), .bit_equal_to = "cpu.serial"},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("nll_loss"));
D9M_REGISTER_VARIANTS(variants("softmax_cross_entropy"));
D9M_REGISTER_VARIANTS(grad_variants());

}  // namespace d9m::loss
