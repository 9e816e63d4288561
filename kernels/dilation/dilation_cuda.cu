// CUDA variants of the dilation gradients: TensorFlow's kernels (a thread per output position,
// GpuAtomicAdd at its maximum), and the sort-based ordered form.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/dilation/dilation.h"

namespace d9m::dilation {
namespace {

template <bool kToFilter>
void run(const KernelArgs& a, accumulate::Order order) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<T>(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()),
                               MaxGrads<T, kToFilter>{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1), a.in<T>(2)});
  });
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("dilation2d_bwd_input", run<false>));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("dilation2d_bwd_filter", run<true>));

}  // namespace d9m::dilation
