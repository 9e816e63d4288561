// CUDA variants of maxpool2d (a thread per output, cpu.serial's code) and maxpool2d_bwd: the
// framework kernel's atomicAdd at the argmax, the sort-based ordered form, and the gather form
// (cuda.gather, a thread per input element).
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants_cuda.cuh"
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
}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("maxpool2d_bwd", maxpool2d_bwd));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("maxpool2d_bwd", maxpool2d_bwd));

D9M_REGISTER_VARIANTS(map::cuda::cuda_gather_variant<WindowGradGather>("maxpool2d_bwd"));

}  // namespace d9m::maxpool
