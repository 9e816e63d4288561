// CUDA variants of embedding_bag_bwd (embedding.h):
//   max          cuda.atomic is EmbeddingBag_accGradParametersKernel_max's shape, a thread per
//                (bag, feature) with atomicAdd in T; cuda.ordered the sort-based scatter of
//                accumulate_cuda.cuh (each output adds its bags in order).
//   sum / mean   cuda.ordered is embedding_backward_cuda_kernel's pipeline: a stable radix sort of
//                (row, position), runs of equal rows, partial segments of kRowsPerPartial, a thread
//                per (partial, feature) summing one (compute_grad_weight_bags), a thread per (row,
//                feature) adding its partials in order (sum_and_scatter). cuda.atomic is d9m's: a
//                thread per (entry, feature) adding into an Acc<T> buffer with atomicAdd.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/embedding/embedding.h"

namespace d9m::embedding {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// The forward's offset2bag and bag_size, a thread per bag.
__global__ void describe_bags_kernel(Geometry g, const std::int32_t* indices, const std::int32_t* offsets, std::int32_t* offset2bag,
                                     std::int32_t* bag_size) {
  const std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (b < g.bags) describe_bag(g, indices, offsets, b, offset2bag, bag_size);
}

__global__ void iota_kernel(std::int64_t n, std::int32_t* out) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = static_cast<std::int32_t>(i);
}

// krn_partials_per_segment: ceil(length / kRowsPerPartial) per run (0 past the last run, whose
// lengths were zeroed).
__global__ void partials_per_run_kernel(std::int64_t n, const int* lengths, int* partials) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < n) partials[r] = static_cast<int>((lengths[r] + kRowsPerPartial - 1) / kRowsPerPartial);
}

// krn_partial_segment_offset: each run's partial segments, [begin, end) in sorted positions.
__global__ void partial_bounds_kernel(const int* runs, const int* run_starts, const int* run_lengths, const int* partial_offsets,
                                      int* partial_begin, int* partial_end) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= *runs) return;
  const int end = run_starts[r] + run_lengths[r];
  int at = partial_offsets[r];
  for (int k = run_starts[r]; k < end; k += static_cast<int>(kRowsPerPartial)) {
    partial_begin[at] = k;
    partial_end[at++] = k + static_cast<int>(kRowsPerPartial) < end ? k + static_cast<int>(kRowsPerPartial) : end;
  }
}

// compute_grad_weight_bags: a thread per (partial segment, feature). `total` is the count of
// partials (at partial_offsets[I], the scan's last element).
template <class T>
__global__ void partial_sums_kernel(BagGrads<T> grads, const std::int32_t* positions, const int* total, const int* partial_begin,
                                    const int* partial_end, Acc<T>* partials) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t p = t / grads.g.dim, f = t % grads.g.dim;
  if (p >= *total) return;
  partials[t] = grads.partial(positions, partial_begin[p], partial_end[p], f);
}

// sum_and_scatter: a thread per (run, feature) adds its run's partials in order from 0 and writes
// the row once (rows equal to padding_idx stay 0).
template <class T>
__global__ void sum_and_scatter_kernel(Geometry g, const std::uint32_t* rows, const int* runs, const int* partial_offsets,
                                       const int* run_lengths, const Acc<T>* partials, T* out) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t r = t / g.dim, f = t % g.dim;
  if (r >= *runs) return;
  const auto row = static_cast<std::int64_t>(rows[r]);
  if (row == g.padding_idx) return;
  const int first = partial_offsets[r], count = static_cast<int>((run_lengths[r] + kRowsPerPartial - 1) / kRowsPerPartial);
  Acc<T> total = 0;
  for (int k = 0; k < count; ++k) total = total + partials[(static_cast<std::int64_t>(first) + k) * g.dim + f];
  out[row * g.dim + f] = narrow<T>(total);
}

// CUB's two-call idiom: the size query, then the call with that much temporary storage.
template <class Call>
void with_temp(cudaStream_t stream, Call call) {
  std::size_t bytes = 0;
  D9M_CUDA_CHECK(call(nullptr, bytes));
  DeviceBuffer temp(bytes, stream);
  D9M_CUDA_CHECK(call(temp.get(), bytes));
}

template <class T>
void sorted_rows(const KernelArgs& a, const BagGrads<T>& grads) {
  using A = Acc<T>;
  const cudaStream_t stream = cuda::stream_of(a);
  const Geometry& g = grads.g;
  const int n = static_cast<int>(g.indices);
  if (n == 0) return;
  // 1. (row, position) pairs sorted by row, stably (rows are >= 0: their bits sort as unsigned).
  DeviceBuffer positions(sz(n) * sizeof(std::int32_t), stream), sorted_rows_(sz(n) * sizeof(std::uint32_t), stream),
      sorted_positions(sz(n) * sizeof(std::int32_t), stream);
  iota_kernel<<<blocks_for(sz(n)), 256, 0, stream>>>(n, positions.get<std::int32_t>());
  D9M_CUDA_CHECK_LAUNCH();
  const auto* keys = reinterpret_cast<const std::uint32_t*>(grads.indices);
  const int end_bit = accumulate::cuda::bits_for(sz(g.num_embeddings));
  with_temp(stream, [&](void* temp, std::size_t& bytes) {
    return cub::DeviceRadixSort::SortPairs(temp, bytes, keys, sorted_rows_.get<std::uint32_t>(), positions.get<std::int32_t>(),
                                           sorted_positions.get<std::int32_t>(), n, 0, end_bit, stream);
  });
  // 2. runs of equal rows and where they start (lengths past the last run zeroed for the scans).
  DeviceBuffer rows(sz(n) * sizeof(std::uint32_t), stream), lengths(sz(n + 1) * sizeof(int), stream),
      starts(sz(n + 1) * sizeof(int), stream), runs(sizeof(int), stream);
  D9M_CUDA_CHECK(cudaMemsetAsync(lengths.get(), 0, lengths.bytes(), stream));
  with_temp(stream, [&](void* temp, std::size_t& bytes) {
    return cub::DeviceRunLengthEncode::Encode(temp, bytes, sorted_rows_.get<std::uint32_t>(), rows.get<std::uint32_t>(),
                                              lengths.get<int>(), runs.get<int>(), n, stream);
  });
  with_temp(stream, [&](void* temp, std::size_t& bytes) {
    return cub::DeviceScan::ExclusiveSum(temp, bytes, lengths.get<int>(), starts.get<int>(), n, stream);
  });
  // 3. partial segments per run, their offsets (the total at [n]) and bounds.
  DeviceBuffer per_run(sz(n + 1) * sizeof(int), stream), offsets(sz(n + 1) * sizeof(int), stream);
  partials_per_run_kernel<<<blocks_for(sz(n + 1)), 256, 0, stream>>>(n + 1, lengths.get<int>(), per_run.get<int>());
  D9M_CUDA_CHECK_LAUNCH();
  with_temp(stream, [&](void* temp, std::size_t& bytes) {
    return cub::DeviceScan::ExclusiveSum(temp, bytes, per_run.get<int>(), offsets.get<int>(), n + 1, stream);
  });
  DeviceBuffer begin(sz(n) * sizeof(int), stream), end(sz(n) * sizeof(int), stream);
  partial_bounds_kernel<<<blocks_for(sz(n)), 256, 0, stream>>>(runs.get<int>(), starts.get<int>(), lengths.get<int>(),
                                                              offsets.get<int>(), begin.get<int>(), end.get<int>());
  D9M_CUDA_CHECK_LAUNCH();
  // 4. the partial sums (at most n partials), then each row's sum of its partials.
  const std::size_t threads = sz(n) * sz(g.dim);
  DeviceBuffer partials(threads * sizeof(A), stream);
  partial_sums_kernel<T><<<blocks_for(threads), 256, 0, stream>>>(grads, sorted_positions.get<std::int32_t>(), offsets.get<int>() + n,
                                                                  begin.get<int>(), end.get<int>(), partials.get<A>());
  D9M_CUDA_CHECK_LAUNCH();
  sum_and_scatter_kernel<T><<<blocks_for(threads), 256, 0, stream>>>(g, rows.get<std::uint32_t>(), runs.get<int>(), offsets.get<int>(),
                                                                     lengths.get<int>(), partials.get<A>(), a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T>
void run(const KernelArgs& a, accumulate::Order order, T) {
  const cudaStream_t stream = cuda::stream_of(a);
  const Geometry& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  if (g.mode == Mode::max) {
    const MaxGrads<T> en{g, a.in<std::int32_t>(3), a.in<T>(4)};
    accumulate::cuda::apply<T>(order, a, en.sources(), en);
    return;
  }
  if (g.indices == 0) return;
  DeviceBuffer offset2bag(sz(g.indices) * sizeof(std::int32_t), stream), bag_size(sz(g.bags) * sizeof(std::int32_t), stream);
  describe_bags_kernel<<<blocks_for(sz(g.bags)), 256, 0, stream>>>(g, a.in<std::int32_t>(0), a.in<std::int32_t>(1),
                                                                   offset2bag.get<std::int32_t>(), bag_size.get<std::int32_t>());
  D9M_CUDA_CHECK_LAUNCH();
  const BagGrads<T> grads{g, a.in<std::int32_t>(0), offset2bag.get<std::int32_t>(), bag_size.get<std::int32_t>(), a.in<T>(2),
                          g.per_sample_weights ? a.in<T>(3) : nullptr};
  if (order == accumulate::Order::atomic) accumulate::cuda::apply_widened<T>(order, a, grads.sources(), grads);
  else sorted_rows<T>(a, grads);
}

std::vector<VariantDef> variants() {
  const std::string op = "embedding_bag_bwd";
  return {
      {.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
       .claim = op::nondeterministic("atomicAdd in hardware order: PyTorch's max kernel (a thread per bag and feature, in T); "
                                     "for sum and mean d9m's thread per entry and feature (in Acc<T>)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, accumulate::Order::atomic, t); })},
      {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("stable radix sort by row, then each row in the reference order: PyTorch's partial sums "
                                  "(sum, mean), the bags in order (max) (bit-equal to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, accumulate::Order::ordered, t); }), .bit_equal_to = "cpu.serial"},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::embedding
