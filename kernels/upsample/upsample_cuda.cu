// CUDA variants of the upsample gradients: cuda.atomic is PyTorch's kernel shape (a thread per
// output position looping over n and c, atomicAdd in the dtype), cuda.ordered a thread per
// grad_input element gathering its contributions in the reference order (upsample.h).
#include "kernels/common/gather_variants_cuda.cuh"
#include "kernels/upsample/upsample.h"

namespace d9m::upsample {

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_gather_variants<BicubicGrad, Geometry>("resize_bicubic_grad"));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_gather_variants<TrilinearGrad, Geometry>("resize_trilinear_grad"));

}  // namespace d9m::upsample
