// The CUDA counterparts of accumulate.h, for ops in scatter form (the same enumerator functors
// run on the device):
//
//   atomic   one thread per source; every contribution is an atomicAdd, so the order of adds
//            into one address is the hardware scheduler's: the framework kernels' behaviour.
//   ordered  1. each source counts its contributions; 2. an exclusive scan gives each source
//            its slice; 3. each source writes (target, value) pairs into its slice in emission
//            order, so the pair array is in reference order; 4. CUB's radix sort by target,
//            which is stable, keeps that order within a target; 5. run-length encoding finds
//            each target's segment; 6. one thread per target adds its segment in order onto the
//            initial value. Every target therefore receives exactly the reference sequence of
//            float adds: the bits equal cpu.serial and cpu.ordered (cross-implementation).
#pragma once
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/common/accumulate.h"
#include "kernels/common/cuda_check.h"

namespace d9m::accumulate::cuda {

// atomicAdd in T: the hardware's for float and double, and for __half and __nv_bfloat16 (native
// on sm_70+ and sm_80+: the frameworks' half-precision scatter kernels).
__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(std::int32_t* p, std::int32_t v) { atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v)); }
__device__ inline void atomic_add(Half* p, Half v) { atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.bits)); }
__device__ inline void atomic_add(BFloat16* p, BFloat16 v) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.bits));
}

template <class T>
struct AtomicEmit {
  T* out;
  __device__ void operator()(std::size_t t, T v) const { atomic_add(out + t, v); }
};

template <class T>
struct CountEmit {
  unsigned long long n = 0;
  __device__ void operator()(std::size_t, T) { ++n; }
};

template <class T>
struct WriteEmit {
  std::uint32_t* keys;
  T* values;
  unsigned long long at;
  __device__ void operator()(std::size_t t, T v) {
    keys[at] = static_cast<std::uint32_t>(t);
    values[at] = v;
    ++at;
  }
};

template <class T, class En>
__global__ void atomic_kernel(std::size_t sources, T* out, En en) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= sources) return;
  AtomicEmit<T> emit{out};
  en(s, emit);
}

template <class T, class En>
__global__ void count_kernel(std::size_t sources, unsigned long long* counts, En en) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= sources) return;
  CountEmit<T> emit;
  en(s, emit);
  counts[s] = emit.n;
}

template <class T, class En>
__global__ void write_kernel(std::size_t sources, const unsigned long long* offsets, std::uint32_t* keys,
                             T* values, En en) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= sources) return;
  WriteEmit<T> emit{keys, values, offsets[s]};
  en(s, emit);
}

// One thread per run of equal targets: out[t] += values[first..first+len) in order, each add
// rounded once in T (half.h add(), the same code as the CPU's).
template <class T>
__global__ void segment_sum_kernel(const std::uint32_t* unique_targets, const int* run_lengths,
                                   const int* run_offsets, const int* runs, const T* values, T* out) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= *runs) return;
  const std::uint32_t t = unique_targets[r];
  T acc = out[t];
  const int first = run_offsets[r], end = first + run_lengths[r];
  for (int i = first; i < end; ++i) acc = add(acc, values[i]);
  out[t] = acc;
}

// The radix sort moves values as opaque payload; the 16-bit types travel as their bits.
template <class T>
using SortValue = std::conditional_t<sizeof(T) == 2, std::uint16_t, T>;

inline int bits_for(std::size_t targets) {
  int bits = 1;
  while (bits < 32 && (std::size_t{1} << bits) < targets) ++bits;
  return bits;
}

template <class T, class En>
void atomic(cudaStream_t stream, std::size_t sources, T* out, En en) {
  if (sources == 0) return;
  atomic_kernel<<<blocks_for(sources), 256, 0, stream>>>(sources, out, en);
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T, class En>
void ordered(cudaStream_t stream, std::size_t sources, std::size_t targets, T* out, En en) {
  if (sources == 0 || targets == 0) return;
  // 1-2. counts and offsets (one extra element so the scan also yields the total).
  DeviceBuffer counts((sources + 1) * sizeof(unsigned long long), stream);
  DeviceBuffer offsets((sources + 1) * sizeof(unsigned long long), stream);
  D9M_CUDA_CHECK(cudaMemsetAsync(counts.get(), 0, counts.bytes(), stream));
  count_kernel<T><<<blocks_for(sources), 256, 0, stream>>>(sources, counts.get<unsigned long long>(), en);
  D9M_CUDA_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, counts.get<unsigned long long>(),
                                               offsets.get<unsigned long long>(), sources + 1, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), temp_bytes, counts.get<unsigned long long>(),
                                                 offsets.get<unsigned long long>(), sources + 1, stream));
  }
  unsigned long long total = 0;
  D9M_CUDA_CHECK(cudaMemcpyAsync(&total, offsets.get<unsigned long long>() + sources, sizeof total,
                                 cudaMemcpyDeviceToHost, stream));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (total == 0) return;
  if (total > static_cast<unsigned long long>(INT_MAX))
    throw Unsupported("cuda.ordered: more than 2^31 contributions; CUB's run-length encoding counts items in int");
  const int m = static_cast<int>(total);

  // 3. pairs in reference order.
  using V = SortValue<T>;
  DeviceBuffer keys(total * sizeof(std::uint32_t), stream), values(total * sizeof(T), stream);
  write_kernel<T><<<blocks_for(sources), 256, 0, stream>>>(sources, offsets.get<unsigned long long>(),
                                                           keys.get<std::uint32_t>(), values.get<T>(), en);
  D9M_CUDA_CHECK_LAUNCH();

  // 4. stable sort by target.
  DeviceBuffer keys_sorted(total * sizeof(std::uint32_t), stream), values_sorted(total * sizeof(T), stream);
  const int end_bit = bits_for(targets);
  temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys.get<std::uint32_t>(), keys_sorted.get<std::uint32_t>(),
                                                 values.get<V>(), values_sorted.get<V>(), m, 0, end_bit, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys.get<std::uint32_t>(),
                                                   keys_sorted.get<std::uint32_t>(), values.get<V>(),
                                                   values_sorted.get<V>(), m, 0, end_bit, stream));
  }

  // 5. segments of equal targets.
  DeviceBuffer unique(total * sizeof(std::uint32_t), stream), lengths(total * sizeof(int), stream);
  DeviceBuffer starts(total * sizeof(int), stream), runs(sizeof(int), stream);
  // Encode writes only the first `runs` lengths; the scan below reads all m, so zero the rest.
  D9M_CUDA_CHECK(cudaMemsetAsync(lengths.get(), 0, lengths.bytes(), stream));
  temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, temp_bytes, keys_sorted.get<std::uint32_t>(),
                                                    unique.get<std::uint32_t>(), lengths.get<int>(), runs.get<int>(), m, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp.get(), temp_bytes, keys_sorted.get<std::uint32_t>(),
                                                      unique.get<std::uint32_t>(), lengths.get<int>(), runs.get<int>(), m, stream));
  }
  temp_bytes = 0;
  D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, lengths.get<int>(), starts.get<int>(), m, stream));
  {
    DeviceBuffer temp(temp_bytes, stream);
    D9M_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), temp_bytes, lengths.get<int>(), starts.get<int>(), m, stream));
  }

  // 6. one thread per segment, in order. (At most `m` segments; threads past the run count exit.)
  segment_sum_kernel<T><<<blocks_for(static_cast<std::size_t>(m)), 256, 0, stream>>>(
      unique.get<std::uint32_t>(), lengths.get<int>(), starts.get<int>(), runs.get<int>(), values_sorted.get<T>(), out);
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T = float, class En>
void apply(Order order, const KernelArgs& a, std::size_t sources, En en) {
  auto stream = static_cast<cudaStream_t>(a.exec.stream);
  if (order == Order::atomic) atomic(stream, sources, a.out<T>(), en);
  else ordered(stream, sources, static_cast<std::size_t>(a.problem.output.numel()), a.out<T>(), en);
}

template <class T>
__global__ void narrow_kernel(const Acc<T>* acc, T* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = narrow<T>(acc[i]);
}

// apply_widened() of accumulate.h on the device: contributions summed in Acc<T> (a zeroed float
// buffer at f16 and bf16), every output rounded once to T at the end.
template <class T, class En>
void apply_widened(Order order, const KernelArgs& a, std::size_t sources, En en) {
  if constexpr (std::is_same_v<Acc<T>, T>) {
    accumulate::cuda::apply<T>(order, a, sources, en);
  } else {
    const auto stream = static_cast<cudaStream_t>(a.exec.stream);
    const auto n = static_cast<std::size_t>(a.problem.output.numel());
    if (n == 0) return;
    DeviceBuffer acc(n * sizeof(Acc<T>), stream);
    D9M_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), stream));  // +0.0f
    if (order == Order::atomic) accumulate::cuda::atomic(stream, sources, acc.get<Acc<T>>(), en);
    else accumulate::cuda::ordered(stream, sources, n, acc.get<Acc<T>>(), en);
    narrow_kernel<T><<<blocks_for(n), 256, 0, stream>>>(acc.get<Acc<T>>(), a.out<T>(), n);
    D9M_CUDA_CHECK_LAUNCH();
  }
}

// cuda.atomic and cuda.ordered of an op in scatter form, for D9M_REGISTER_VARIANTS. run(a, order)
// initialises the output (on a.exec.stream) and calls apply(). cuda.ordered claims the bits of
// cpu.ordered.
std::vector<VariantDef> cuda_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run);

}  // namespace d9m::accumulate::cuda
