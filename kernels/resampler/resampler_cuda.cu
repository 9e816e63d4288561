// CUDA variants of the resampler gradients: the frameworks' kernels (a thread per (b, p, c) for
// TensorFlow, per (n, p) for PyTorch, adding with atomicAdd), and the sort-based ordered form.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/resampler/resampler.h"

namespace d9m::resampler {
namespace {

void data_grads(const KernelArgs& a, accumulate::Order order) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const DataGrads<T> en{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1)};
    accumulate::cuda::apply<T>(order, a, en.sources(), en);
  });
}

void warp_grads(const KernelArgs& a, accumulate::Order order) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const WarpGrads<T> en{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1), a.in<T>(2)};
    accumulate::cuda::apply<T>(order, a, en.sources(), en);
  });
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("resampler_grad_data", data_grads));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("resampler_grad_warp", warp_grads));

}  // namespace d9m::resampler
