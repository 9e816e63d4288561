// CPU variants of maxpool2d_bwd. Source = one window (n, oh, ow, c) in flat NHWC order of grad.
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {
namespace {

auto windows(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), x = a.in<float>(0), dy = a.in<float>(2)](
             std::size_t s, auto& emit) {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t c = i % g.c, ow = (i / g.c) % g.x.out, oh = (i / g.c / g.x.out) % g.y.out,
                       n = i / g.c / g.x.out / g.y.out;
    const std::int64_t at = argmax(g, x, n, oh, ow, c);
    if (at >= 0) emit(static_cast<std::size_t>(at), dy[s]);
  };
}

}  // namespace

// Output starts at zero: positions that are no window's maximum get no gradient.
static const bool registered = accumulate::register_cpu_variants(
    "maxpool2d_bwd", [](const KernelArgs& a, accumulate::Order order) {
      std::memset(a.output, 0, a.problem.output.bytes());
      accumulate::apply(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()), windows(a));
    });

}  // namespace d9m::maxpool
