// CUDA variants of the histogram family: atomicAdd into the bins (int for counts, as TensorFlow's
// bincount kernel; float, double, __half, __nv_bfloat16 for weights), and the sort-based
// ordered form.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/histogram/histogram.h"

namespace d9m::histogram {
namespace {

void counts(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  accumulate::cuda::apply<std::int32_t>(order, a, static_cast<std::size_t>(g.n),
                                        BinValues<std::int32_t>{g, a.in<std::int32_t>(0), nullptr});
}

void sums(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<T>(order, a, static_cast<std::size_t>(g.n), BinValues<T>{g, a.in<std::int32_t>(0), a.in<T>(1)});
  });
}

std::vector<VariantDef> count_variants() {
  auto v = accumulate::cuda::cuda_variants("bincount", counts);
  for (auto& x : v)
    if (x.role == Role::atomic) {
      x.claim = op::deterministic("integer atomicAdd: a count is the same in any order");
      x.bit_equal_to = "cpu.serial";
    }
  return v;
}

}  // namespace

D9M_REGISTER_VARIANTS(count_variants());
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("bincount_weighted", sums));

}  // namespace d9m::histogram
