// CPU variants of the sparse family:
//   cpu.serial   one thread walks the nonzeros in ascending index and adds each product into its
//                output: the reference order (sparse.h).
//   cpu.atomic   tasks of kAtomicGrain consecutive nonzeros on every worker thread add their
//                products with atomic adds: a heavy row's nonzeros span many tasks, and with
//                A^T every column's output is shared by all the rows, so the adds race.
//   cpu.ordered  one task per block of output rows gathers each output's products in ascending
//                nonzero index: for A from the row's own range (CSR offsets, or a binary search
//                of the sorted COO row indices), for A^T from a CSC built once per call by one
//                thread with a stable counting sort. cpu.serial's bits on any thread count.
#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/common/thread_pool.h"
#include "kernels/sparse/sparse.h"

namespace d9m::sparse {
namespace {

// Nonzeros per task of cpu.atomic: small, so that many tasks add into one heavy row at once.
constexpr std::int64_t kAtomicGrain = 16;
// Output rows per task of cpu.ordered and of the final rounding. Fixed, never the thread count.
constexpr std::size_t kRowsPerTask = 16;

template <class T>
struct View {
  const Geometry& g;
  const std::int32_t* row_arg;  // row offsets (CSR) or row indices (COO)
  const std::int32_t* cols;
  const T* values;
  const T* dense;
  T* out;

  explicit View(const KernelArgs& a)
      : g(a.problem.geom<Geometry>()), row_arg(a.in<std::int32_t>(kRowsArg)), cols(a.in<std::int32_t>(kColsArg)),
        values(a.in<T>(kValuesArg)), dense(a.in<T>(kDenseArg)), out(a.out<T>()) {}

  // Calls fn(k, r) for the nonzeros k in [begin, end), ascending, r the row of k.
  template <class F>
  void for_nonzeros(std::int64_t begin, std::int64_t end, F&& fn) const {
    if (begin >= end) return;
    if (g.format == Format::coo) {
      for (std::int64_t k = begin; k < end; ++k) fn(k, std::int64_t{row_arg[k]});
      return;
    }
    std::int64_t r = csr_row_of(row_arg, g.rows, begin);
    for (std::int64_t k = begin; k < end; ++k) {
      while (row_arg[r + 1] <= k) ++r;
      fn(k, r);
    }
  }

  // Calls add(output index, product) for the n products of nonzero k in row r, in column order.
  template <class Add>
  void products(std::int64_t k, std::int64_t r, Add&& add) const {
    std::int64_t t, s;
    target_source(g, r, cols[k], t, s);
    const T v = values[k];
    for (std::int64_t j = 0; j < g.n; ++j) add(t * g.n + j, product(v, dense[dense_index(g, s, j)]));
  }

  // out = the accumulators rounded to T, in fixed blocks.
  void round_out(ThreadPool* pool, const std::vector<Acc<T>>& acc) const {
    const auto n = static_cast<std::size_t>(g.outputs());
    if (!pool) {
      for (std::size_t o = 0; o < n; ++o) out[o] = narrow<T>(acc[o]);
      return;
    }
    parallel_blocks(*pool, n, kRowsPerTask * 256, [&](std::size_t begin, std::size_t end) {
      for (std::size_t o = begin; o < end; ++o) out[o] = narrow<T>(acc[o]);
    });
  }
};

template <class T>
void serial(const KernelArgs& a) {
  const View<T> v(a);
  std::vector<Acc<T>> acc(static_cast<std::size_t>(v.g.outputs()), Acc<T>(0));
  v.for_nonzeros(0, v.g.nnz, [&](std::int64_t k, std::int64_t r) {
    v.products(k, r, [&](std::int64_t o, Acc<T> p) { acc[static_cast<std::size_t>(o)] = acc[static_cast<std::size_t>(o)] + p; });
  });
  v.round_out(nullptr, acc);
}

template <class T>
void atomic(const KernelArgs& a) {
  const View<T> v(a);
  std::vector<Acc<T>> acc(static_cast<std::size_t>(v.g.outputs()), Acc<T>(0));
  const std::int64_t tasks = (v.g.nnz + kAtomicGrain - 1) / kAtomicGrain;
  a.exec.pool->parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task) {
    const auto begin = static_cast<std::int64_t>(task) * kAtomicGrain;
    v.for_nonzeros(begin, std::min(v.g.nnz, begin + kAtomicGrain), [&](std::int64_t k, std::int64_t r) {
      v.products(k, r, [&](std::int64_t o, Acc<T> p) {
        std::atomic_ref<Acc<T>>(acc[static_cast<std::size_t>(o)]).fetch_add(p, std::memory_order_relaxed);
      });
    });
  });
  v.round_out(a.exec.pool, acc);
}

// A^T as CSR, that is A as CSC: for each column c its nonzeros' rows and values, in ascending
// nonzero index. One thread, a counting pass and a stable placement pass. (Rows fit int32, as
// the inputs'; the arrays are left uninitialised, every slot being written once.)
template <class T>
struct Csc {
  std::vector<std::int64_t> begin;  // cols + 1
  std::unique_ptr<std::int32_t[]> row;
  std::unique_ptr<T[]> value;
};

template <class T>
Csc<T> build_csc(const View<T>& v) {
  Csc<T> c;
  const auto cols = static_cast<std::size_t>(v.g.cols), nnz = static_cast<std::size_t>(v.g.nnz);
  c.begin.assign(cols + 1, 0);
  for (std::size_t k = 0; k < nnz; ++k) ++c.begin[static_cast<std::size_t>(v.cols[k]) + 1];
  for (std::size_t j = 0; j < cols; ++j) c.begin[j + 1] += c.begin[j];
  std::vector<std::int64_t> next(c.begin.begin(), c.begin.end() - 1);
  c.row.reset(new std::int32_t[nnz]);
  c.value.reset(new T[nnz]);
  v.for_nonzeros(0, v.g.nnz, [&](std::int64_t k, std::int64_t r) {
    const auto at = static_cast<std::size_t>(next[static_cast<std::size_t>(v.cols[k])]++);
    c.row[at] = static_cast<std::int32_t>(r);
    c.value[at] = v.values[k];
  });
  return c;
}

template <class T>
void ordered(const KernelArgs& a) {
  const View<T> v(a);
  const Geometry& g = v.g;
  Csc<T> csc;
  if (g.transpose) csc = build_csc(v);
  parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.out_rows()), kRowsPerTask, [&](std::size_t first, std::size_t last) {
    std::vector<Acc<T>> acc(static_cast<std::size_t>(g.n));
    for (std::size_t t = first; t < last; ++t) {
      std::fill(acc.begin(), acc.end(), Acc<T>(0));
      auto add = [&](T value, std::int64_t source) {
        for (std::int64_t j = 0; j < g.n; ++j)
          acc[static_cast<std::size_t>(j)] = acc[static_cast<std::size_t>(j)] + product(value, v.dense[dense_index(g, source, j)]);
      };
      if (g.transpose) {
        for (std::int64_t p = csc.begin[t]; p < csc.begin[t + 1]; ++p) add(csc.value[p], csc.row[p]);
      } else {
        std::int64_t begin, end;
        row_range(g, v.row_arg, static_cast<std::int64_t>(t), begin, end);
        for (std::int64_t k = begin; k < end; ++k) add(v.values[k], v.cols[k]);
      }
      for (std::int64_t j = 0; j < g.n; ++j) v.out[static_cast<std::int64_t>(t) * g.n + j] = narrow<T>(acc[static_cast<std::size_t>(j)]);
    }
  });
}

std::vector<VariantDef> variants(const std::string& op) {
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread adds each output's products in ascending nonzero index"),
           .run = typed([](const KernelArgs& a, auto tag) { serial<decltype(tag)>(a); })},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("tasks of 16 nonzeros add their products with atomic adds from worker threads in "
                                         "scheduler order (heavy rows, and with A^T every column, span many tasks)"),
           .run = typed([](const KernelArgs& a, auto tag) { atomic<decltype(tag)>(a); })},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("each output row is gathered by one task in ascending nonzero index (A^T: through "
                                      "a CSC built by one stable counting sort); the bits of cpu.serial"),
           .run = typed([](const KernelArgs& a, auto tag) { ordered<decltype(tag)>(a); }),
           .bit_equal_to = "cpu.serial"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("spmv"));
D9M_REGISTER_VARIANTS(variants("spmm"));
D9M_REGISTER_VARIANTS(variants("sparse_dense_matmul"));

}  // namespace d9m::sparse
