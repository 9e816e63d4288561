// CPU variants of maxpool2d_bwd. Source = one window (n, oh, ow, c) in flat NHWC order of grad.
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {
namespace {

WindowGrads windows(const KernelArgs& a) {
  return {a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(2)};
}

}  // namespace

// Output starts at zero: positions that are no window's maximum get no gradient.
D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "maxpool2d_bwd", [](const KernelArgs& a, accumulate::Order order) {
      std::memset(a.output, 0, a.problem.output.bytes());
      accumulate::apply(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()), windows(a));
    }));

}  // namespace d9m::maxpool
