// CPU variants of the histogram family, in scatter form (source = one element of arr).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/histogram/histogram.h"

namespace d9m::histogram {
namespace {

void counts(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::apply<std::int32_t>(order, a, static_cast<std::size_t>(g.n),
                                  BinValues<std::int32_t>{g, a.in<std::int32_t>(0), nullptr});
}

void sums(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(g.n), BinValues<T>{g, a.in<std::int32_t>(0), a.in<T>(1)});
  });
}

// Integer atomic adds commute exactly: bincount's atomic variant claims determinism.
std::vector<VariantDef> count_variants() {
  auto v = accumulate::cpu_variants("bincount", counts);
  for (auto& x : v)
    if (x.role == Role::atomic) {
      x.claim = op::deterministic("integer atomic adds from worker threads: a count is the same in any order");
      x.bit_equal_to = "cpu.serial";
    }
  return v;
}

}  // namespace

D9M_REGISTER_VARIANTS(count_variants());
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("bincount_weighted", sums));

}  // namespace d9m::histogram
