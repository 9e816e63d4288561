// CUDA variants of maxpool2d (a thread per output, cpu.serial's code) and maxpool2d_bwd: the
// framework kernel's atomicAdd at the argmax, the sort-based ordered form, and the gather form
// (cuda.gather, a thread per input element).
#include <memory>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants_cuda.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {

D9M_REGISTER_VARIANTS(map::cuda::cuda_variants<PoolMap>("maxpool2d"));

namespace {
void maxpool2d_bwd(const KernelArgs& a, accumulate::Order order) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<T>(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()),
                               WindowGrads<T>{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(2)});
  });
}

// The gather form (maxpool.h): a thread per window, then a thread per grad_input element, on
// the case's stream; the maxima's buffer comes from prepare(), so a trial allocates nothing.
template <class T>
void maxpool2d_bwd_gathered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* orig_input = a.in<T>(0);
  const T* grad = a.in<T>(2);
  T* out = a.out<T>();
  auto* maxima = static_cast<std::int64_t*>(a.state);
  cuda::for_each_index(a, windows_of(a.problem), [=] __device__(std::size_t s) {
    maxima[s] = window_argmax(g, orig_input, static_cast<std::int64_t>(s));
  });
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t e) {
    out[e] = gathered_grad(g, maxima, grad, static_cast<std::int64_t>(e));
  });
}
}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("maxpool2d_bwd", maxpool2d_bwd));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("maxpool2d_bwd", maxpool2d_bwd));

D9M_REGISTER_VARIANTS({{.op = "maxpool2d_bwd", .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered,
                        .claim = gather_claim(),
                        .run = typed([](const KernelArgs& a, auto tag) { maxpool2d_bwd_gathered<decltype(tag)>(a); }),
                        .prepare = [](const Problem& p, const ExecContext& e) {
                          auto maxima = std::make_shared<DeviceBuffer>(8 * windows_of(p), static_cast<cudaStream_t>(e.stream));
                          return Prepared{std::shared_ptr<void>(maxima, maxima->get()), std::nullopt};
                        },
                        .bit_equal_to = "cpu.serial", .memory = gather_memory}});

}  // namespace d9m::maxpool
