// CPU variants of the upsample gradients: cpu.serial and cpu.atomic in scatter form (a source per
// output position, as PyTorch's threads), cpu.ordered in gather form (upsample.h).
#include "kernels/common/gather_variants.h"
#include "kernels/upsample/upsample.h"

namespace d9m::upsample {

D9M_REGISTER_VARIANTS(accumulate::cpu_gather_variants<BicubicGrad, Geometry>("resize_bicubic_grad"));
D9M_REGISTER_VARIANTS(accumulate::cpu_gather_variants<TrilinearGrad, Geometry>("resize_trilinear_grad"));

}  // namespace d9m::upsample
