// CPU variants of the padding gradients: cpu.serial and cpu.atomic in scatter form (a source per
// grad_output element, as PyTorch's threads), cpu.ordered in gather form (padding.h).
#include "kernels/common/gather_variants.h"
#include "kernels/padding/padding.h"

namespace d9m::padding {

D9M_REGISTER_VARIANTS(accumulate::cpu_gather_variants<PadGrad, Geometry>("reflection_pad2d_bwd"));
D9M_REGISTER_VARIANTS(accumulate::cpu_gather_variants<PadGrad, Geometry>("replication_pad2d_bwd"));

}  // namespace d9m::padding
