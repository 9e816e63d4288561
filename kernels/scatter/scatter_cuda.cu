// CUDA variants of the scatter family.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

void copy_ref(const KernelArgs& a) {
  D9M_CUDA_CHECK(cudaMemcpyAsync(a.output, a.inputs[0], a.problem.output.bytes(), cudaMemcpyDeviceToDevice,
                                 cuda::stream_of(a)));
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "scatter_add", [](const KernelArgs& a, accumulate::Order o) {
      const auto& g = a.problem.geom<Geometry>();
      copy_ref(a);
      accumulate::cuda::apply(o, a, static_cast<std::size_t>(g.updates),
                              UpdateRows{g, a.in<float>(2), a.in<std::int32_t>(1), Indexing::rows});
    }));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "scatter_nd_add", [](const KernelArgs& a, accumulate::Order o) {
      const auto& g = a.problem.geom<Geometry>();
      copy_ref(a);
      accumulate::cuda::apply(o, a, static_cast<std::size_t>(g.updates),
                              UpdateRows{g, a.in<float>(2), a.in<std::int32_t>(1), Indexing::pairs});
    }));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "unsorted_segment_sum", [](const KernelArgs& a, accumulate::Order o) {
      const auto& g = a.problem.geom<Geometry>();
      cuda::zero_output(a);
      accumulate::cuda::apply(o, a, static_cast<std::size_t>(g.updates),
                              UpdateRows{g, a.in<float>(0), a.in<std::int32_t>(1), Indexing::segments});
    }));

}  // namespace d9m::scatter
