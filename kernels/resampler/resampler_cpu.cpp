// CPU variants of the resampler gradients (resampler.h has the sources of each semantics).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/resampler/resampler.h"

namespace d9m::resampler {
namespace {

void data_grads(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const DataGrads<T> en{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1)};
    accumulate::apply<T>(order, a, en.sources(), en);
  });
}

void warp_grads(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const WarpGrads<T> en{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1), a.in<T>(2)};
    accumulate::apply<T>(order, a, en.sources(), en);
  });
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("resampler_grad_data", data_grads));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("resampler_grad_warp", warp_grads));

}  // namespace d9m::resampler
