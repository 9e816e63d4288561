// CPU variants of the resize family. Forward ops write each output once (serial, and ordered
// over threads); the grads are in scatter form with source = one grads pixel (n, y, x), and in
// gather form (cpu.gather: each source pixel sums the grads pixels that sample it).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/resize/resize.h"

namespace d9m::resize {
namespace {

// Writes output rows [begin, end) of a forward resize; row = (n, oy).
template <bool bilinear, class T>
void forward_rows(const KernelArgs& a, std::size_t begin, std::size_t end) {
  const auto& g = a.problem.geom<Geometry>();
  const T* in = a.in<T>(0);
  T* out = a.out<T>();
  for (std::size_t row = begin; row < end; ++row) {
    const auto r = static_cast<std::int64_t>(row);
    const std::int64_t n = r / g.oh, oy = r % g.oh;
    for (std::int64_t ox = 0; ox < g.ow; ++ox)
      for (std::int64_t c = 0; c < g.c; ++c)
        out[(r * g.ow + ox) * g.c + c] = bilinear ? bilinear_value(g, in, n, oy, ox, c) : nearest_value(g, in, n, oy, ox, c);
  }
}

template <bool bilinear>
void forward_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  with_float_type(a.problem.dtype, [&](auto tag) { forward_rows<bilinear, decltype(tag)>(a, 0, static_cast<std::size_t>(g.n * g.oh)); });
}

template <bool bilinear>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  with_float_type(a.problem.dtype, [&](auto tag) {
    parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.n * g.oh), 4,
                    [&](std::size_t b, std::size_t e) { forward_rows<bilinear, decltype(tag)>(a, b, e); });
  });
}

// Taps is BilinearGradTaps or NearestGradTaps, at the config's dtype.
template <template <class> class Taps>
void grad(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(g.n * g.oh * g.ow), Taps<T>{g, a.in<T>(0)});
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "resize_bilinear", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = forward_serial<true>}});
D9M_REGISTER_VARIANTS({{.op = "resize_bilinear", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = forward_ordered<true>, .bit_equal_to = "cpu.serial"}});
D9M_REGISTER_VARIANTS({{.op = "resize_nearest", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = forward_serial<false>}});
D9M_REGISTER_VARIANTS({{.op = "resize_nearest", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = forward_ordered<false>, .bit_equal_to = "cpu.serial"}});

D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "resize_bilinear_grad", [](const KernelArgs& a, accumulate::Order o) { grad<BilinearGradTaps>(a, o); }));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant(
    "resize_bilinear_grad", [](const KernelArgs& a, accumulate::Order o) { grad<BilinearGradTaps>(a, o); }));
D9M_REGISTER_VARIANTS(map::cpu_gather_variant<BilinearGradGather>("resize_bilinear_grad"));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "resize_nearest_grad", [](const KernelArgs& a, accumulate::Order o) { grad<NearestGradTaps>(a, o); }));

D9M_REGISTER_VARIANTS(map::cpu_gather_variant<NearestGradGather>("resize_nearest_grad"));

}  // namespace d9m::resize
