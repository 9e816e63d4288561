// CUDA variants of the optim family: a thread per element, cpu.serial's code.
#include "kernels/common/map_variants_cuda.cuh"
#include "kernels/optim/optim.h"

namespace d9m::optim {

D9M_REGISTER_VARIANTS(map::cuda::cuda_variants<SgdMap>("sgd_update"));

}  // namespace d9m::optim
