// CPU variants of the scatter family. Source = one update row (data row); it adds its D values
// into one destination row, in the config's dtype.
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

// Adds the update rows (input `updates`, indices input `indices`) onto the initialised output.
void add_rows(const KernelArgs& a, accumulate::Order order, std::size_t updates, std::size_t indices, Indexing indexing) {
  const auto& g = a.problem.geom<Geometry>();
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(g.updates),
                         UpdateRows<T>{g, a.in<T>(updates), a.in<std::int32_t>(indices), indexing});
  });
}

void scatter_add(const KernelArgs& a, accumulate::Order order) {
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());  // starts from ref
  add_rows(a, order, 2, 1, Indexing::rows);
}

void scatter_nd_add(const KernelArgs& a, accumulate::Order order) {
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());
  add_rows(a, order, 2, 1, Indexing::pairs);
}

void unsorted_segment_sum(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0.0 in every float type
  add_rows(a, order, 0, 1, Indexing::segments);
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("unsorted_segment_sum", unsorted_segment_sum));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("unsorted_segment_sum", unsorted_segment_sum));

}  // namespace d9m::scatter
