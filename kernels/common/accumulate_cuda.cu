#include "kernels/common/accumulate_cuda.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "kernels/common/op_helpers.h"

namespace d9m::accumulate::cuda {

namespace {

// One thread per run of equal targets: out[t] += values[first..first+len) in order, each add
// rounded once in T (half.h add(), the same code as the CPU's).
// A run of key `targets` or more is padding (ordered() sized from the plan's bound): skipped.
template <class T>
__global__ void segment_sum_kernel(const std::uint32_t* unique_targets, const int* run_lengths,
                                   const int* run_offsets, const int* runs, std::size_t targets, const T* values, T* out) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= *runs) return;
  const std::uint32_t t = unique_targets[r];
  if (t >= targets) return;
  T acc = out[t];
  const int first = run_offsets[r], end = first + run_lengths[r];
  for (int i = first; i < end; ++i) acc = add(acc, values[i]);
  out[t] = acc;
}

// The radix sort moves values as opaque payload; the 16-bit types travel as their bits.
template <class T>
using SortValue = std::conditional_t<sizeof(T) == 2, std::uint16_t, T>;

}  // namespace

void exclusive_sum(cudaStream_t stream, const unsigned long long* in, unsigned long long* out, std::size_t n) {
  std::size_t temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, in, out, n, stream));
  DeviceBuffer temp(temp_bytes, stream);
  D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), temp_bytes, in, out, n, stream));
}

template <class T>
void sort_and_add_wave(cudaStream_t stream, WaveBuffers& b, int m, std::size_t targets, bool padded, T* out) {
  using V = SortValue<T>;
  // 4. stable sort by target (keys 0..targets where padded: the padding key too).
  const int end_bit = bits_for(padded ? targets + 1 : targets);
  std::size_t temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, b.keys.get<std::uint32_t>(), b.keys_sorted.get<std::uint32_t>(),
                                                 b.values.get<V>(), b.values_sorted.get<V>(), m, 0, end_bit, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, b.keys.get<std::uint32_t>(),
                                                   b.keys_sorted.get<std::uint32_t>(), b.values.get<V>(),
                                                   b.values_sorted.get<V>(), m, 0, end_bit, stream));
  }

  // 5. segments of equal targets.
  // Encode writes only the first `runs` lengths; the scan below reads all m, so zero the rest.
  D9M_CUDA_CHECK(cudaMemsetAsync(b.lengths.get(), 0, static_cast<std::size_t>(m) * sizeof(int), stream));
  temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, temp_bytes, b.keys_sorted.get<std::uint32_t>(),
                                                    b.unique.get<std::uint32_t>(), b.lengths.get<int>(), b.runs.get<int>(), m, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp.get(), temp_bytes, b.keys_sorted.get<std::uint32_t>(),
                                                      b.unique.get<std::uint32_t>(), b.lengths.get<int>(), b.runs.get<int>(), m, stream));
  }
  temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, b.lengths.get<int>(), b.starts.get<int>(), m, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), temp_bytes, b.lengths.get<int>(), b.starts.get<int>(), m, stream));
  }

  // 6. one thread per segment, in order, onto what earlier waves left. (At most `m` segments;
  // threads past the run count exit.)
  segment_sum_kernel<T><<<blocks_for(static_cast<std::size_t>(m)), 256, 0, stream>>>(
      b.unique.get<std::uint32_t>(), b.lengths.get<int>(), b.starts.get<int>(), b.runs.get<int>(), targets, b.values_sorted.get<T>(), out);
  D9M_CUDA_CHECK_LAUNCH();
}

template void sort_and_add_wave<float>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, float*);
template void sort_and_add_wave<double>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, double*);
template void sort_and_add_wave<Half>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, Half*);
template void sort_and_add_wave<BFloat16>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, BFloat16*);
template void sort_and_add_wave<std::int32_t>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, std::int32_t*);

std::uint64_t ordered_buffer_bytes(const Problem& p) {
  const std::uint64_t m = p.contributions == 0 ? kWaveContributions : std::min(p.contributions, kWaveContributions);
  // A pair is a 32-bit target and a value (8 bytes for f64, at most 4 otherwise): the pairs, the
  // sorted pairs, the radix sort's own space (about one more copy), and 12 bytes per item for the
  // run-length encoding (unique targets, lengths, starts).
  const std::uint64_t pair = 4 + (p.dtype == DType::f64 ? 8 : 4);
  return m * (3 * pair + 12);
}

std::vector<VariantDef> cuda_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("float atomicAdd from GPU threads in hardware scheduling order"),
           .run = [run](const KernelArgs& a) { run(a, Order::atomic); }},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("stable radix sort by output, then one thread adds each output's "
                                      "contributions in reference order (bit-equal to cpu.ordered)"),
           .run = [run](const KernelArgs& a) { run(a, Order::ordered); },
           .bit_equal_to = "cpu.ordered",
           .memory = [](const Problem& p) -> std::optional<WorkingMemory> {
             return WorkingMemory{ordered_buffer_bytes(p), "one wave of (output, value) pairs, sorted and run-length encoded"};
           }}};
}

std::vector<VariantDef> cuda_fixed_point_variant(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cuda.fixed_point", .backend = Backend::cuda, .role = Role::ordered, .claim = op::fixed_point_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::fixed_point); },
           .bit_equal_to = "cpu.fixed_point",
           .memory = [](const Problem& p) -> std::optional<WorkingMemory> {
             return WorkingMemory{fixed_point_buffer_bytes(p), "a 128-bit accumulator and a double per output element"};
           }}};
}

}  // namespace d9m::accumulate::cuda
