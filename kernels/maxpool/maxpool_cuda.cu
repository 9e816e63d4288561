// CUDA variants of maxpool2d_bwd: the framework kernel's atomicAdd at the argmax, and the
// sort-based ordered form.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "maxpool2d_bwd", [](const KernelArgs& a, accumulate::Order order) {
      cuda::zero_output(a);
      accumulate::cuda::apply(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()),
                              WindowGrads{a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(2)});
    }));

}  // namespace d9m::maxpool
