// CPU variants of embedding_bag_bwd (embedding.h has the semantics of each mode).
#include <cstring>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/embedding/embedding.h"

namespace d9m::embedding {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// sum / mean: what the forward hands the backward (offset2bag, bag_size), then the contributions.
template <class T>
struct Bags {
  std::vector<std::int32_t> offset2bag, bag_size;
  BagGrads<T> grads;

  explicit Bags(const KernelArgs& a) {
    const Geometry& g = a.problem.geom<Geometry>();
    const auto* indices = a.in<std::int32_t>(0);
    const auto* offsets = a.in<std::int32_t>(1);
    offset2bag.assign(sz(g.indices), 0);
    bag_size.assign(sz(g.bags), 0);
    for (std::int64_t b = 0; b < g.bags; ++b) describe_bag(g, indices, offsets, b, offset2bag.data(), bag_size.data());
    grads = {g, indices, offset2bag.data(), bag_size.data(), a.in<T>(2), g.per_sample_weights ? a.in<T>(3) : nullptr};
  }
};

// PyTorch's arrangement: a stable sort of the positions by row (here a counting sort: each row's
// entries in ascending position), then each row's partials of kRowsPerPartial added in order. One
// thread (serial) or rows in fixed blocks on the worker threads (ordered): the same bits.
template <class T>
void sorted_rows(const KernelArgs& a, bool parallel) {
  const Bags<T> bags(a);
  const Geometry& g = bags.grads.g;
  const auto* indices = a.in<std::int32_t>(0);
  std::vector<std::int64_t> start(sz(g.num_embeddings) + 1, 0);
  for (std::int64_t i = 0; i < g.indices; ++i) ++start[sz(indices[i]) + 1];
  for (std::size_t e = 0; e < sz(g.num_embeddings); ++e) start[e + 1] += start[e];
  std::vector<std::int32_t> positions(sz(g.indices));
  std::vector<std::int64_t> next(start.begin(), start.end() - 1);
  for (std::int64_t i = 0; i < g.indices; ++i) positions[sz(next[sz(indices[i])]++)] = static_cast<std::int32_t>(i);

  T* out = a.out<T>();
  auto rows = [&](std::size_t begin, std::size_t end) {
    for (std::size_t e = begin; e < end; ++e) {
      const bool written = start[e] < start[e + 1] && static_cast<std::int64_t>(e) != g.padding_idx;
      for (std::int64_t f = 0; f < g.dim; ++f)
        out[static_cast<std::int64_t>(e) * g.dim + f] = written ? bags.grads.row_sum(positions.data(), start[e], start[e + 1], f) : T{};
    }
  };
  if (parallel) parallel_blocks(*a.exec.pool, sz(g.num_embeddings), 64, rows);
  else rows(0, sz(g.num_embeddings));
}

template <class T>
void run(const KernelArgs& a, accumulate::Order order, T) {
  const Geometry& g = a.problem.geom<Geometry>();
  if (g.mode == Mode::max) {
    std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
    const MaxGrads<T> en{g, a.in<std::int32_t>(3), a.in<T>(4)};
    accumulate::apply<T>(order, a, en.sources(), en);
    return;
  }
  if (order != accumulate::Order::atomic) return sorted_rows<T>(a, order == accumulate::Order::ordered);
  std::memset(a.output, 0, a.problem.output.bytes());
  const Bags<T> bags(a);
  accumulate::apply_widened<T>(order, a, bags.grads.sources(), bags.grads);
}

std::vector<VariantDef> variants() {
  const std::string op = "embedding_bag_bwd";
  return {
      {.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread: PyTorch's sorted rows with partial sums of 10 (sum, mean), the bags in order "
                                  "(max)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, accumulate::Order::serial, t); })},
      {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::deterministic("a stable sort by row, then each row in the reference order on worker threads (bit-equal "
                                  "to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, accumulate::Order::ordered, t); }), .bit_equal_to = "cpu.serial"},
      {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
       .claim = op::nondeterministic("atomic adds from worker threads in scheduler order: each bag's gradient at its maximum's "
                                     "row in T (max), each entry's contribution in Acc<T> (sum, mean)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, accumulate::Order::atomic, t); })},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::embedding
