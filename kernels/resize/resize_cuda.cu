// CUDA variants of the resize family: forward ops one thread per output, grads in scatter form
// and in gather form (cuda.gather, a thread per source element).
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/resize/resize.h"

namespace d9m::resize {
namespace {

template <bool bilinear, class T>
void forward(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* in = a.in<T>(0);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t i) {
    const auto e = static_cast<std::int64_t>(i);
    const std::int64_t c = e % g.c, ox = (e / g.c) % g.ow, oy = (e / g.c / g.ow) % g.oh, n = e / g.c / g.ow / g.oh;
    out[i] = bilinear ? bilinear_value(g, in, n, oy, ox, c) : nearest_value(g, in, n, oy, ox, c);
  });
}

template <template <class> class Taps>
void grad(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<T>(order, a, static_cast<std::size_t>(g.n * g.oh * g.ow), Taps<T>{g, a.in<T>(0)});
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "resize_bilinear", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto tag) { forward<true, decltype(tag)>(a); }), .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS({{.op = "resize_nearest", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto tag) { forward<false, decltype(tag)>(a); }), .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "resize_bilinear_grad", [](const KernelArgs& a, accumulate::Order o) { grad<BilinearGradTaps>(a, o); }));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant(
    "resize_bilinear_grad", [](const KernelArgs& a, accumulate::Order o) { grad<BilinearGradTaps>(a, o); }));
D9M_REGISTER_VARIANTS(map::cuda::cuda_gather_variant<BilinearGradGather>("resize_bilinear_grad"));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "resize_nearest_grad", [](const KernelArgs& a, accumulate::Order o) { grad<NearestGradTaps>(a, o); }));

D9M_REGISTER_VARIANTS(map::cuda::cuda_gather_variant<NearestGradGather>("resize_nearest_grad"));

}  // namespace d9m::resize
