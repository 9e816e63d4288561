// CPU variants of the activation family: elementwise, in map form (kernels/common/map_variants.h).
#include "kernels/activation/activation.h"
#include "kernels/common/map_variants.h"

namespace d9m::activation {

D9M_REGISTER_VARIANTS(map::cpu_variants<ReluMap>("relu"));
D9M_REGISTER_VARIANTS(map::cpu_variants<ReluGradMap>("relu_grad"));

}  // namespace d9m::activation
