// CPU variants of maxpool2d (map form: kernels/common/map_variants.h) and maxpool2d_bwd (source =
// one window (n, oh, ow, c) in flat NHWC order of grad; cpu.gather: each input element sums the
// windows whose maximum it is).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {

D9M_REGISTER_VARIANTS(map::cpu_variants<PoolMap>("maxpool2d", 64));

namespace {
// Output starts at zero: positions that are no window's maximum get no gradient.
void maxpool2d_bwd(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()),
                         WindowGrads<T>{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(2)});
  });
}
}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("maxpool2d_bwd", maxpool2d_bwd));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("maxpool2d_bwd", maxpool2d_bwd));

D9M_REGISTER_VARIANTS(map::cpu_gather_variant<WindowGradGather>("maxpool2d_bwd", 64));

}  // namespace d9m::maxpool
