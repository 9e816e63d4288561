// CPU variants of the dilation gradients. Source = one output position (n, oh, ow, c) in flat
// NHWC order of out_backprop.
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/dilation/dilation.h"

namespace d9m::dilation {
namespace {

template <bool kToFilter>
void run(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()),
                         MaxGrads<T, kToFilter>{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1), a.in<T>(2)});
  });
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("dilation2d_bwd_input", run<false>));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("dilation2d_bwd_filter", run<true>));

}  // namespace d9m::dilation
