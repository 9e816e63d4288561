// CUDA variants of the scatter family, in the config's dtype.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

void copy_ref(const KernelArgs& a) {
  D9M_CUDA_CHECK(cudaMemcpyAsync(a.output, a.inputs[0], a.problem.output.bytes(), cudaMemcpyDeviceToDevice,
                                 cuda::stream_of(a)));
}

// Adds the update rows (input `updates`, indices input `indices`) onto the initialised output.
void add_rows(const KernelArgs& a, accumulate::Order order, std::size_t updates, std::size_t indices, Indexing indexing) {
  const auto& g = a.problem.geom<Geometry>();
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<T>(order, a, static_cast<std::size_t>(g.updates),
                               UpdateRows<T>{g, a.in<T>(updates), a.in<std::int32_t>(indices), indexing});
  });
}

void scatter_add(const KernelArgs& a, accumulate::Order o) {
  copy_ref(a);
  add_rows(a, o, 2, 1, Indexing::rows);
}
void scatter_nd_add(const KernelArgs& a, accumulate::Order o) {
  copy_ref(a);
  add_rows(a, o, 2, 1, Indexing::pairs);
}
void unsorted_segment_sum(const KernelArgs& a, accumulate::Order o) {
  cuda::zero_output(a);
  add_rows(a, o, 0, 1, Indexing::segments);
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("unsorted_segment_sum", unsorted_segment_sum));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("unsorted_segment_sum", unsorted_segment_sum));

}  // namespace d9m::scatter
