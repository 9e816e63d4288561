// CUDA variants of the padding gradients: cuda.atomic is PyTorch's kernel shape (a thread per
// grad_output element, atomicAdd in the dtype), cuda.ordered a thread per grad_input element
// gathering its preimage in the reference order (padding.h).
#include "kernels/common/gather_variants_cuda.cuh"
#include "kernels/padding/padding.h"

namespace d9m::padding {

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_gather_variants<PadGrad, Geometry>("reflection_pad2d_bwd"));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_gather_variants<PadGrad, Geometry>("replication_pad2d_bwd"));

}  // namespace d9m::padding
