// CPU variants of the conv backprops. Source = one forward output position (n, oh, ow).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"

namespace d9m::conv {
namespace {

BwdDataTaps bwd_data_taps(const KernelArgs& a) { return {a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(1)}; }
BwdFilterTaps bwd_filter_taps(const KernelArgs& a) { return {a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(1)}; }

template <class Taps>
void run(const KernelArgs& a, accumulate::Order order, Taps&& taps_of) {
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::apply(order, a, positions(a.problem.geom<Geometry>()), taps_of(a));
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "conv2d_bwd_data", [](const KernelArgs& a, accumulate::Order o) { run(a, o, bwd_data_taps); }));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "conv2d_bwd_filter", [](const KernelArgs& a, accumulate::Order o) { run(a, o, bwd_filter_taps); }));

}  // namespace d9m::conv
