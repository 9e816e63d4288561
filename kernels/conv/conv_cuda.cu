// Direct CUDA variants of the conv backprops (the cuDNN ones are in conv_cudnn.cu).
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/conv/conv.h"

namespace d9m::conv {

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "conv2d_bwd_data", [](const KernelArgs& a, accumulate::Order order) {
      const auto& g = a.problem.geom<Geometry>();
      cuda::zero_output(a);
      if (order == accumulate::Order::atomic) {
        const BwdDataTapSplit split{g, a.in<float>(0), a.in<float>(1)};
        accumulate::cuda::apply(order, a, positions(g) * split.taps_per_position(), split);
      } else {
        accumulate::cuda::apply(order, a, positions(g), BwdDataTaps{g, a.in<float>(0), a.in<float>(1)});
      }
    }));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "conv2d_bwd_filter", [](const KernelArgs& a, accumulate::Order order) {
      const auto& g = a.problem.geom<Geometry>();
      cuda::zero_output(a);
      accumulate::cuda::apply(order, a, positions(g), BwdFilterTaps{g, a.in<float>(0), a.in<float>(1)});
    }));

}  // namespace d9m::conv
