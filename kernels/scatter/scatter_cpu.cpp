// CPU variants of the scatter family. Source = one update row (data row); it adds its D values
// into one destination row.
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

void scatter_add(const KernelArgs& a, accumulate::Order order) {
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());  // starts from ref
  const auto& g = a.problem.geom<Geometry>();
  accumulate::apply(order, a, static_cast<std::size_t>(g.updates),
                    UpdateRows{g, a.in<float>(2), a.in<std::int32_t>(1), Indexing::rows});
}

void scatter_nd_add(const KernelArgs& a, accumulate::Order order) {
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());
  const auto& g = a.problem.geom<Geometry>();
  accumulate::apply(order, a, static_cast<std::size_t>(g.updates),
                    UpdateRows{g, a.in<float>(2), a.in<std::int32_t>(1), Indexing::pairs});
}

void unsorted_segment_sum(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());
  const auto& g = a.problem.geom<Geometry>();
  accumulate::apply(order, a, static_cast<std::size_t>(g.updates),
                    UpdateRows{g, a.in<float>(0), a.in<std::int32_t>(1), Indexing::segments});
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("unsorted_segment_sum", unsorted_segment_sum));

}  // namespace d9m::scatter
