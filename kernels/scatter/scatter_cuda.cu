// CUDA variants of the scatter family, in the config's dtype.
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/keyed_lists_cuda.h"
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

// The gather form (scatter.h) on the device. Each call: a key per update row (its destination,
// or none for a dropped row), the rows listed per destination (keyed_lists_cuda.h: a stable sort,
// so each destination's rows stay in increasing u), then a thread per output element. The lists'
// buffers come from prepare(): no allocation and no host round trip per trial.
template <class T>
void add_rows_gathered(const KernelArgs& a, std::size_t updates_input, Indexing indexing, bool init_from_ref) {
  const Geometry g = a.problem.geom<Geometry>();
  auto& lists = *static_cast<cuda::KeyedLists*>(a.state);
  const std::int32_t* indices = a.in<std::int32_t>(1);
  std::uint32_t* keys = lists.item_keys();
  const std::uint32_t none = lists.none();
  cuda::for_each_index(a, static_cast<std::size_t>(g.updates), [=] __device__(std::size_t u) {
    const std::int64_t d = destination(g, indices, indexing, u);
    keys[u] = d < 0 ? none : static_cast<std::uint32_t>(d);
  });
  lists.list();
  const T* upd = a.in<T>(updates_input);
  const T* ref = init_from_ref ? a.in<T>(0) : nullptr;
  T* out = a.out<T>();
  const std::int32_t* rows_sorted = lists.items_by_key();
  const std::int32_t* row_start = lists.starts();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t e) {
    out[e] = gathered_element(g, upd, rows_sorted, row_start, e, ref ? ref[e] : T{0});
  });
}

std::vector<VariantDef> cuda_gather_variant(const std::string& op, std::size_t updates_input, Indexing indexing, bool init_from_ref) {
  return {{.op = op, .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered,
           .claim = gather_claim(),
           .unsupported = [](const Problem& p) { return gather_unsupported(p, true); },
           .run = typed([=](const KernelArgs& a, auto tag) { add_rows_gathered<decltype(tag)>(a, updates_input, indexing, init_from_ref); }),
           .prepare = [](const Problem& p, const ExecContext& e) {
             const auto& g = p.geom<Geometry>();
             auto lists = std::make_shared<cuda::KeyedLists>(static_cast<std::size_t>(g.updates), static_cast<std::uint64_t>(g.destinations),
                                                             static_cast<cudaStream_t>(e.stream));
             return Prepared{std::shared_ptr<void>(lists, lists.get()), std::nullopt};
           },
           .bit_equal_to = "cpu.serial",
           .memory = [](const Problem& p) {
             return std::optional<WorkingMemory>{{gather_bytes(p.geom<Geometry>(), true), "the update rows' sort keys and positions, and CUB's scratch"}};
           }}};
}

}  // namespace

D9M_REGISTER_VARIANTS(cuda_gather_variant("scatter_add", 2, Indexing::rows, true));
D9M_REGISTER_VARIANTS(cuda_gather_variant("scatter_nd_add", 2, Indexing::pairs, true));
D9M_REGISTER_VARIANTS(cuda_gather_variant("unsorted_segment_sum", 0, Indexing::segments, false));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("unsorted_segment_sum", unsorted_segment_sum));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("unsorted_segment_sum", unsorted_segment_sum));

}  // namespace d9m::scatter
