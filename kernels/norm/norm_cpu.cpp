// CPU variants of the norm family (norm.h): the row-by-row ops on one thread or in fixed blocks of
// rows on the worker threads; the parameter gradients' row sums in the three orders.
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/norm/norm.h"

namespace d9m::norm {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// Rows per task of the row-by-row ops: a row is D outputs, so a few rows are already worth a task.
constexpr std::size_t kRowsPerTask = 16;

template <template <class> class Rows>
std::vector<VariantDef> row_variants(const std::string& op) {
  return {
      {.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread, rows in order, each row's sums in ascending column order"),
       .run = typed([](const KernelArgs& a, auto tag) {
         const Rows<decltype(tag)> rows(a);
         for (std::size_t r = 0; r < rows.items(); ++r) rows(r, a.out<decltype(tag)>());
       })},
      {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::deterministic("each row by one task with the reference code: rows share no sum (bit-equal to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto tag) {
         const Rows<decltype(tag)> rows(a);
         parallel_blocks(*a.exec.pool, rows.items(), kRowsPerTask, [&](std::size_t begin, std::size_t end) {
           for (std::size_t r = begin; r < end; ++r) rows(r, a.out<decltype(tag)>());
         });
       }),
       .bit_equal_to = "cpu.serial"},
  };
}

enum class Order { serial, ordered, atomic };

// dgamma or dbeta. The row moments (gamma only) first, a row per task but for serial; then the
// column sums over rows in the variant's order.
template <class T>
void param_grad(const KernelArgs& a, Order order, T) {
  using A = Acc<T>;
  const Geometry& g = a.problem.geom<Geometry>();
  ThreadPool& pool = *a.exec.pool;
  const bool gamma = g.param == Param::gamma;
  const T* x = gamma ? a.in<T>(1) : nullptr;
  std::vector<Moments<A>> moments(gamma ? sz(g.rows) : 0);
  if (gamma) for_each_index(pool, order == Order::serial, g.rows, [&](std::int64_t r) { moments[sz(r)] = row_moments(g, x, r); });
  const ParamTerms<T> terms{g, a.in<T>(0), x, moments.data()};
  T* out = a.out<T>();
  const std::size_t dim = sz(g.dim);

  if (order == Order::serial) {
    std::vector<A> acc(dim, A(0));
    for (std::int64_t r = 0; r < g.rows; ++r)
      for (std::int64_t c = 0; c < g.dim; ++c) acc[sz(c)] = acc[sz(c)] + terms(r, c);
    for (std::size_t c = 0; c < dim; ++c) out[c] = narrow<T>(acc[c]);
  } else if (order == Order::ordered) {
    std::vector<A> partial(sz(g.blocks()) * dim);
    pool.parallel_for(sz(g.blocks()), [&](std::size_t b) {
      for (std::int64_t c = 0; c < g.dim; ++c) partial[b * dim + sz(c)] = block_sum(terms, static_cast<std::int64_t>(b), c);
    });
    for (std::int64_t c = 0; c < g.dim; ++c) out[c] = blocks_total<T>(g, partial.data(), c);
  } else {
    // Tasks of a few rows, so the threads' adds into the same D accumulators interleave.
    std::vector<A> acc(dim, A(0));
    parallel_blocks(pool, sz(g.rows), accumulate::kAtomicGrain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r)
        for (std::int64_t c = 0; c < g.dim; ++c) accumulate::atomic_add(&acc[sz(c)], terms(static_cast<std::int64_t>(r), c));
    });
    for (std::size_t c = 0; c < dim; ++c) out[c] = narrow<T>(acc[c]);
  }
}

std::vector<VariantDef> param_variants(const std::string& op) {
  return {
      {.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread: each column's row terms in ascending row order, in the accumulation type"),
       .run = typed([](const KernelArgs& a, auto t) { param_grad(a, Order::serial, t); })},
      {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::deterministic("fixed blocks of 64 rows summed in row order on the worker threads, then the block sums "
                                  "in block order"),
       .run = typed([](const KernelArgs& a, auto t) { param_grad(a, Order::ordered, t); })},
      {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
       .claim = op::nondeterministic("each row's terms added into the column accumulators with float atomic adds from "
                                     "worker threads, in scheduler order"),
       .run = typed([](const KernelArgs& a, auto t) { param_grad(a, Order::atomic, t); })},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(row_variants<ForwardRows>("layer_norm"));
D9M_REGISTER_VARIANTS(row_variants<GradInputRows>("layer_norm_grad_input"));
D9M_REGISTER_VARIANTS(param_variants("layer_norm_grad_gamma"));
D9M_REGISTER_VARIANTS(param_variants("layer_norm_grad_beta"));

}  // namespace d9m::norm
