// CUDA variants of the activation family: a thread per element, cpu.serial's code.
#include "kernels/activation/activation.h"
#include "kernels/common/map_variants_cuda.cuh"

namespace d9m::activation {

D9M_REGISTER_VARIANTS(map::cuda::cuda_variants<ReluMap>("relu"));
D9M_REGISTER_VARIANTS(map::cuda::cuda_variants<ReluGradMap>("relu_grad"));

}  // namespace d9m::activation
