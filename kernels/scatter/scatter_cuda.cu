// CUDA variants of the scatter family, in the config's dtype.
#include <cub/device/device_radix_sort.cuh>

#include <memory>
#include <string>
#include <vector>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/cuda_check.h"
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

// The gather form (scatter.h) on the device. Each call: a key per row (its destination, or
// `destinations` for a dropped row, so that dropped rows sort last), CUB's radix sort of (key, row)
// pairs, which is stable (rows of one destination stay in increasing u), each destination's start
// by binary search in the sorted keys, then a thread per output element. Every buffer and CUB's
// scratch come from prepare(), sized by the plan: no allocation and no host round trip per trial.
struct GatherBuffers {
  DeviceBuffer keys, keys_sorted, rows, rows_sorted, row_start, scratch;
  std::size_t scratch_bytes = 0;
  int end_bit = 1;  // the keys' significant bits: 0..destinations
};

std::shared_ptr<GatherBuffers> gather_buffers(const Problem& p, cudaStream_t stream) {
  const auto& g = p.geom<Geometry>();
  const auto rows = static_cast<std::size_t>(g.updates);
  auto b = std::make_shared<GatherBuffers>();
  b->keys = DeviceBuffer(4 * rows, stream);
  b->keys_sorted = DeviceBuffer(4 * rows, stream);
  b->rows = DeviceBuffer(4 * rows, stream);
  b->rows_sorted = DeviceBuffer(4 * rows, stream);
  b->row_start = DeviceBuffer(4 * (static_cast<std::size_t>(g.destinations) + 1), stream);
  while (b->end_bit < 32 && (std::uint64_t{1} << b->end_bit) <= static_cast<std::uint64_t>(g.destinations)) ++b->end_bit;
  if (rows > 0) {
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, b->scratch_bytes, b->keys.get<std::uint32_t>(), b->keys_sorted.get<std::uint32_t>(),
                                                   b->rows.get<std::int32_t>(), b->rows_sorted.get<std::int32_t>(), static_cast<int>(rows), 0,
                                                   b->end_bit, stream));
    b->scratch = DeviceBuffer(b->scratch_bytes, stream);
  }
  return b;
}

template <class T>
void add_rows_gathered(const KernelArgs& a, std::size_t updates_input, Indexing indexing, bool init_from_ref) {
  const Geometry g = a.problem.geom<Geometry>();
  auto& b = *static_cast<GatherBuffers*>(a.state);
  const auto rows = static_cast<std::size_t>(g.updates);
  const auto dests = static_cast<std::uint32_t>(g.destinations);
  const std::int32_t* indices = a.in<std::int32_t>(1);
  std::uint32_t* keys = b.keys.get<std::uint32_t>();
  const std::uint32_t* keys_sorted = b.keys_sorted.get<std::uint32_t>();
  std::int32_t* row_ids = b.rows.get<std::int32_t>();
  const std::int32_t* rows_sorted = b.rows_sorted.get<std::int32_t>();
  std::int32_t* row_start = b.row_start.get<std::int32_t>();
  cuda::for_each_index(a, rows, [=] __device__(std::size_t u) {
    const std::int64_t d = destination(g, indices, indexing, u);
    keys[u] = d < 0 ? dests : static_cast<std::uint32_t>(d);
    row_ids[u] = static_cast<std::int32_t>(u);
  });
  if (rows > 0) {
    std::size_t scratch_bytes = b.scratch_bytes;
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.scratch.get(), scratch_bytes, keys, b.keys_sorted.get<std::uint32_t>(), row_ids,
                                                   b.rows_sorted.get<std::int32_t>(), static_cast<int>(rows), 0, b.end_bit,
                                                   cuda::stream_of(a)));
  }
  // start[d]: the first sorted position whose key is d or more (start[dests]: the rows kept).
  cuda::for_each_index(a, static_cast<std::size_t>(dests) + 1, [=] __device__(std::size_t d) {
    std::size_t lo = 0, hi = rows;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (keys_sorted[mid] < d) lo = mid + 1;
      else hi = mid;
    }
    row_start[d] = static_cast<std::int32_t>(lo);
  });
  const T* upd = a.in<T>(updates_input);
  const T* ref = init_from_ref ? a.in<T>(0) : nullptr;
  T* out = a.out<T>();
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
             auto b = gather_buffers(p, static_cast<cudaStream_t>(e.stream));
             return Prepared{std::shared_ptr<void>(b, b.get()), std::nullopt};
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
