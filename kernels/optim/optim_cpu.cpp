// CPU variants of the optim family: elementwise, in map form (kernels/common/map_variants.h).
#include "kernels/common/map_variants.h"
#include "kernels/optim/optim.h"

namespace d9m::optim {

D9M_REGISTER_VARIANTS(map::cpu_variants<SgdMap>("sgd_update"));

}  // namespace d9m::optim
