// The symv op and its CPU variants: the serial reference, and rows split over threads (each row
// by one task in the reference order, so its bits are the reference's on any thread count).
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/symv/symv.h"

namespace d9m::symv {
namespace {

template <class T>
void rows(const KernelArgs& a, bool parallel) {
  const std::int64_t n = a.problem.geom<Geometry>().n;
  const T* m = a.in<T>(0);
  const T* x = a.in<T>(1);
  T* y = a.out<T>();
  if (!parallel) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = row(m, x, n, i);
    return;
  }
  a.exec.pool->parallel_for(static_cast<std::size_t>(n), [&](std::size_t i) {
    y[i] = row(m, x, n, static_cast<std::int64_t>(i));
  });
}

void run(const KernelArgs& a, bool parallel) {
  if (a.problem.dtype == DType::f64) rows<double>(a, parallel);
  else rows<float>(a, parallel);
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "symv", .family = "symv",
    .summary = "symv: y[N] = A x, A[N,N] symmetric, its lower triangle read (BLAS symv)",
    .params = {op::integer("n", "order of A")},
    .tolerance = 1e-5,
    .dtypes = {DType::f32, DType::f64},
    .plan = [](const Params& p) {
      const std::int64_t n = p.integer("n");
      op::checked_product({n, n}, "n");
      return Problem{{op::f32("a", {n, n}), op::f32("x", {n})}, op::f32("y", {n}), Geometry{n}};
    },
    .fill = [](const Problem&, FillMode mode, std::vector<FillTarget>& in) {
      for (auto& t : in) fill::floats(t, mode);
    }});

D9M_REGISTER_VARIANTS({{.op = "symv", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                        .claim = op::deterministic("one thread adds each row's products in ascending column"),
                        .run = [](const KernelArgs& a) { run(a, false); }},
                       {.op = "symv", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                        .claim = op::per_output_claim(), .run = [](const KernelArgs& a) { run(a, true); },
                        .bit_equal_to = "cpu.serial"}});

}  // namespace d9m::symv
