// CPU variants of the scatter family. Source = one update row (data row); it adds its D values
// into one destination row.
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

// dest_of(u) -> destination row, or -1 to drop the row.
template <class DestOf>
auto rows(const Geometry& g, const float* updates, DestOf dest_of) {
  return [&g, updates, dest_of](std::size_t u, auto& emit) {
    const std::int64_t dest = dest_of(u);
    if (dest < 0) return;
    const auto d = static_cast<std::size_t>(g.depth);
    for (std::size_t k = 0; k < d; ++k) emit(static_cast<std::size_t>(dest) * d + k, updates[u * d + k]);
  };
}

void scatter_add(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());  // starts from ref
  const auto* idx = a.in<std::int32_t>(1);
  accumulate::apply(order, a, static_cast<std::size_t>(g.updates),
                    rows(g, a.in<float>(2), [idx](std::size_t u) { return std::int64_t{idx[u]}; }));
}

void scatter_nd_add(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());
  const auto* idx = a.in<std::int32_t>(1);
  const std::int64_t dim1 = g.dim1;
  accumulate::apply(order, a, static_cast<std::size_t>(g.updates),
                    rows(g, a.in<float>(2), [idx, dim1](std::size_t u) {
                      return std::int64_t{idx[2 * u]} * dim1 + idx[2 * u + 1];
                    }));
}

void unsorted_segment_sum(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  const auto* ids = a.in<std::int32_t>(1);
  const std::int64_t segments = g.destinations;
  accumulate::apply(order, a, static_cast<std::size_t>(g.updates),
                    rows(g, a.in<float>(0), [ids, segments](std::size_t r) {
                      const std::int64_t s = ids[r];
                      return s < segments ? s : -1;  // negative (and, defensively, too large) ids drop
                    }));
}

}  // namespace

static const bool registered_scatter_add = accumulate::register_cpu_variants("scatter_add", scatter_add);
static const bool registered_scatter_nd_add = accumulate::register_cpu_variants("scatter_nd_add", scatter_nd_add);
static const bool registered_segment_sum =
    accumulate::register_cpu_variants("unsorted_segment_sum", unsorted_segment_sum);

}  // namespace d9m::scatter
