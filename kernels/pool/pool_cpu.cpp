// CPU variants of the pool family (pool.h has the sources and the gathers):
//   cpu.serial   one thread adds the sources (grad_output elements) in increasing order: the
//                definition
//   cpu.atomic   tasks of a few sources on all threads add with atomic float adds, in the order
//                the threads get there
//   cpu.ordered  each grad_input element gathers the windows that cover it in increasing order,
//                elements in fixed blocks on all threads: serial's bits, memory of the output only
#include <algorithm>
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/pool/pool.h"

namespace d9m::pool {
namespace {

// Serial or atomic: the sources of `en` added into a zeroed grad_input. Ordered: grad_input's
// rows (its last axis, `width` long) in fixed blocks on all threads, each element its gather,
// row(r, iw) for element iw of row r.
template <class T, class Scatter, class Row>
void run(const KernelArgs& a, accumulate::Order order, std::int64_t width, const Scatter& en, const Row& row) {
  if (order == accumulate::Order::ordered) {
    T* out = a.out<T>();
    const auto rows = static_cast<std::size_t>(a.problem.output.numel() / width);
    const std::size_t grain = static_cast<std::size_t>(std::max<std::int64_t>(1, 256 / width));
    parallel_blocks(*a.exec.pool, rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) row(static_cast<std::int64_t>(r), out + static_cast<std::int64_t>(r) * width);
    });
    return;
  }
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  accumulate::apply<T>(order, a, static_cast<std::size_t>(a.problem.inputs[0].numel()), en);
}

void adaptive_avg(const KernelArgs& a, accumulate::Order order) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Adaptive2d>();
    const T* grad = a.in<T>(0);
    run<T>(a, order, g.x.in, AdaptiveAvgGrads<T>{g, grad}, [&](std::int64_t r, T* out) {
      for (std::int64_t iw = 0; iw < g.x.in; ++iw) out[iw] = adaptive_avg_gather(g, grad, r / g.y.in, r % g.y.in, iw);
    });
  });
}

void adaptive_max(const KernelArgs& a, accumulate::Order order) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Adaptive2d>();
    const T* grad = a.in<T>(0);
    const auto* idx = a.in<std::int32_t>(2);
    run<T>(a, order, g.x.in, IndexedGrads<T>{g.plane_in(), g.plane_out(), grad, idx}, [&](std::int64_t r, T* out) {
      for (std::int64_t iw = 0; iw < g.x.in; ++iw) out[iw] = adaptive_max_gather(g, grad, idx, r / g.y.in, r % g.y.in, iw);
    });
  });
}

void avg3d(const KernelArgs& a, accumulate::Order order) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Pool3d>();
    const T* grad = a.in<T>(0);
    run<T>(a, order, g.x.in, AvgPool3dGrads<T>{g, grad}, [&](std::int64_t r, T* out) {
      const std::int64_t ih = r % g.y.in, it = (r / g.y.in) % g.z.in, plane = r / (g.y.in * g.z.in);
      for (std::int64_t iw = 0; iw < g.x.in; ++iw) out[iw] = avg3d_gather(g, grad, plane, it, ih, iw);
    });
  });
}

void max3d(const KernelArgs& a, accumulate::Order order) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Pool3d>();
    const T* grad = a.in<T>(0);
    const auto* idx = a.in<std::int32_t>(2);
    run<T>(a, order, g.x.in, IndexedGrads<T>{g.plane_in(), g.plane_out(), grad, idx}, [&](std::int64_t r, T* out) {
      const std::int64_t ih = r % g.y.in, it = (r / g.y.in) % g.z.in, plane = r / (g.y.in * g.z.in);
      for (std::int64_t iw = 0; iw < g.x.in; ++iw) out[iw] = max3d_gather(g, grad, idx, plane, it, ih, iw);
    });
  });
}

std::vector<VariantDef> variants(const std::string& op, void (*fn)(const KernelArgs&, accumulate::Order)) {
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference, .claim = op::serial_claim(),
           .run = [fn](const KernelArgs& a) { fn(a, accumulate::Order::serial); }},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic, .claim = op::atomic_claim(),
           .run = [fn](const KernelArgs& a) { fn(a, accumulate::Order::atomic); }},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("each input gathers the windows that cover it in increasing window order: the reference order"),
           .run = [fn](const KernelArgs& a) { fn(a, accumulate::Order::ordered); }, .bit_equal_to = "cpu.serial"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("adaptive_avg_pool2d_bwd", adaptive_avg));
D9M_REGISTER_VARIANTS(variants("adaptive_max_pool2d_bwd", adaptive_max));
D9M_REGISTER_VARIANTS(variants("avg_pool3d_bwd", avg3d));
D9M_REGISTER_VARIANTS(variants("max_pool3d_bwd", max3d));

}  // namespace d9m::pool
