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
//
// Steps 4-6 depend on the value type alone, not on the op: they are compiled once, in
// accumulate_cuda.cu, for every value type (sort_and_add_wave), rather than in every family's
// translation unit (CUB's sorting kernels are most of a family's compile time).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <cstdint>
#include <type_traits>

#include "kernels/common/accumulate.h"
#include "kernels/common/cuda_check.h"

namespace d9m::accumulate::cuda {

// atomicAdd in T, as the frameworks' scatter kernels call it: a hardware reduction for float and
// double (REDG.E.ADD.F32 / .F64 on sm_90); for __half and __nv_bfloat16, CUDA's atomicAdd, which
// ptxas turns into a 32-bit compare-and-swap loop on sm_90 (ATOM.E.CAS: only the packed x2 forms
// are hardware adds), as TensorFlow's GpuAtomicAdd on half is. Under heavy contention such a loop
// likely costs orders of magnitude more than the f32 add (bench/sass_atomics.sh shows the code;
// docs/PERFORMANCE.md what the H200 measured).
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

// Writes the pairs of sources [first, first + count), each at its offset less `base` (the
// first offset of the wave). `limit` is the buffers' size in pairs: a source whose slice would
// pass it stops the kernel (__trap) before writing anything. Only the one-wave path sized from the
// plan's bound can meet it, and only if an op emits more than its plan said (a bug, which the
// CPU forms, sharing the enumerator, report in words first); the trap leaves the case in error
// at its next synchronisation rather than writing past the buffers.
template <class T, class En>
__global__ void write_kernel(std::size_t first, std::size_t count, const unsigned long long* offsets, unsigned long long base,
                             unsigned long long limit, std::uint32_t* keys, T* values, En en) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const std::size_t s = first + i;
  if (offsets[s + 1] - base > limit) __trap();
  WriteEmit<T> emit{keys, values, offsets[s] - base};
  en(s, emit);
}

// Keys [*total, m) of a wave sized from the plan's bound: `targets`, past every target, so that
// the stable sort puts them last and the sum skips them.
__global__ inline void pad_keys_kernel(std::uint32_t* keys, std::size_t m, const unsigned long long* total, std::uint32_t targets) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < m && i >= *total) keys[i] = targets;
}

// Bits of a key below `n` (the radix sort's end bit).
inline int bits_for(std::size_t n) {
  int bits = 1;
  while (bits < 32 && (std::size_t{1} << bits) < n) ++bits;
  return bits;
}

template <class T, class En>
void atomic(cudaStream_t stream, std::size_t sources, T* out, En en) {
  if (sources == 0) return;
  atomic_kernel<<<blocks_for(sources), 256, 0, stream>>>(sources, out, en);
  D9M_CUDA_CHECK_LAUNCH();
}

// Contributions sorted at once by cuda.ordered: sources run in waves whose contributions fit
// this budget, each wave sorted and added onto the output before the next (every target still
// receives its contributions in source order, so the bits are the same whatever the waves).
// About 1.5 GiB of buffers at the budget (pairs, sorted pairs, run-length encoding, sort space).
inline constexpr std::uint64_t kWaveContributions = std::uint64_t{1} << 25;

// The device memory of ordered() on a problem, in bytes: its buffers at the wave budget (or at
// the plan's bound, when smaller). Sources' counts and offsets (16 bytes each) are not included:
// the problem does not say how many sources the op has.
std::uint64_t ordered_buffer_bytes(const Problem& p);

// The sorted, fixed-order sum of the contributions of sources [first, first + count), whose
// pairs start at offset `base` and number m, onto out. Buffers are sized for the largest wave.
struct WaveBuffers {
  DeviceBuffer keys, values, keys_sorted, values_sorted, unique, lengths, starts, runs;
  WaveBuffers(std::size_t m, std::size_t value_bytes, cudaStream_t stream)
      : keys(m * sizeof(std::uint32_t), stream), values(m * value_bytes, stream), keys_sorted(m * sizeof(std::uint32_t), stream),
        values_sorted(m * value_bytes, stream), unique(m * sizeof(std::uint32_t), stream), lengths(m * sizeof(int), stream),
        starts(m * sizeof(int), stream), runs(sizeof(int), stream) {}
};

// Steps 4-6 for one wave: its m pairs (keys, values) sorted stably by target, then each target's
// values added in order onto out. Keys equal to `targets` (padding) sort last and are skipped. Instantiated in accumulate_cuda.cu for float, double, Half,
// BFloat16 and int32 values.
// `padded`: the keys may hold `targets` too, so the sort takes one more bit where that needs it.
template <class T>
void sort_and_add_wave(cudaStream_t stream, WaveBuffers& b, int m, std::size_t targets, bool padded, T* out);
extern template void sort_and_add_wave<float>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, float*);
extern template void sort_and_add_wave<double>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, double*);
extern template void sort_and_add_wave<Half>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, Half*);
extern template void sort_and_add_wave<BFloat16>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, BFloat16*);
extern template void sort_and_add_wave<std::int32_t>(cudaStream_t, WaveBuffers&, int, std::size_t, bool, std::int32_t*);

// Step 2: out[i] = sum of in[0..i) over n items (CUB's exclusive scan, in accumulate_cuda.cu).
void exclusive_sum(cudaStream_t stream, const unsigned long long* in, unsigned long long* out, std::size_t n);

template <class T, class En>
void ordered_wave(cudaStream_t stream, WaveBuffers& b, std::size_t first, std::size_t count, const unsigned long long* offsets,
                  unsigned long long base, int m, std::size_t targets, bool padded, T* out, En en) {
  // 3. pairs in reference order.
  write_kernel<T><<<blocks_for(count), 256, 0, stream>>>(first, count, offsets, base, static_cast<unsigned long long>(m),
                                                         b.keys.get<std::uint32_t>(), b.values.get<T>(), en);
  D9M_CUDA_CHECK_LAUNCH();
  // 4-6. stable sort by target, segments of equal targets, one thread per segment in order.
  sort_and_add_wave(stream, b, m, targets, padded, out);
}

// `bound` is the problem's Problem::contributions (0: not stated): exceeding it is a bug in the
// op's plan, reported as an error. `budget` is the wave budget (a parameter so that the tests can
// make waves small).
//
// Where the plan states a bound within the budget (every catalogued op in scatter form states
// one), the wave is sized from the bound, not from the count the op emitted: the keys past the
// count are padded past every target, sorted last and skipped, so nothing is read back and the
// host never waits in the middle of the op (which drained the GPU between each trial's op and the
// harness's work on it). The sort then takes the bound's pairs rather than the emitted ones: the
// same for most ops (scatter rows, resize taps, max-pool windows emit exactly their bound), a
// little more where samples fall outside (crop_and_resize, padded convolutions). Without a bound,
// or past the budget, the total is read back to size the wave or plan the waves, as before.
template <class T, class En>
void ordered(cudaStream_t stream, std::size_t sources, std::size_t targets, T* out, En en, std::uint64_t bound = 0,
             std::uint64_t budget = kWaveContributions) {
  if (sources == 0 || targets == 0) return;
  // 1-2. counts and offsets (one extra element so the scan also yields the total).
  DeviceBuffer counts((sources + 1) * sizeof(unsigned long long), stream);
  DeviceBuffer offsets((sources + 1) * sizeof(unsigned long long), stream);
  D9M_CUDA_CHECK(cudaMemsetAsync(counts.get(), 0, counts.bytes(), stream));
  count_kernel<T><<<blocks_for(sources), 256, 0, stream>>>(sources, counts.get<unsigned long long>(), en);
  D9M_CUDA_CHECK_LAUNCH();
  exclusive_sum(stream, counts.get<unsigned long long>(), offsets.get<unsigned long long>(), sources + 1);
  if (bound != 0 && bound <= budget && bound <= static_cast<std::uint64_t>(INT_MAX) && targets < 0xffffffffu) {
    const auto m = static_cast<std::size_t>(bound);
    WaveBuffers b(m, sizeof(T), stream);
    pad_keys_kernel<<<blocks_for(m), 256, 0, stream>>>(b.keys.get<std::uint32_t>(), m, offsets.get<unsigned long long>() + sources,
                                                       static_cast<std::uint32_t>(targets));
    D9M_CUDA_CHECK_LAUNCH();
    ordered_wave(stream, b, 0, sources, offsets.get<unsigned long long>(), 0, static_cast<int>(m), targets, true, out, en);
    return;
  }
  unsigned long long total = 0;
  D9M_CUDA_CHECK(cudaMemcpyAsync(&total, offsets.get<unsigned long long>() + sources, sizeof total,
                                 cudaMemcpyDeviceToHost, stream));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (total == 0) return;
  if (bound != 0 && total > bound)
    throw std::logic_error("the op emitted " + std::to_string(total) + " contributions, more than its plan's bound (Problem::contributions = " +
                           std::to_string(bound) + ")");
  if (total <= budget) {
    WaveBuffers b(static_cast<std::size_t>(total), sizeof(T), stream);
    ordered_wave(stream, b, 0, sources, offsets.get<unsigned long long>(), 0, static_cast<int>(total), targets, false, out, en);
    return;
  }
  // Waves: the largest runs of whole sources whose contributions fit the budget (a source beyond
  // it alone makes a wave of its own, up to CUB's int item counts).
  std::vector<unsigned long long> host_offsets(sources + 1);
  D9M_CUDA_CHECK(cudaMemcpyAsync(host_offsets.data(), offsets.get(), (sources + 1) * sizeof(unsigned long long),
                                 cudaMemcpyDeviceToHost, stream));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<std::pair<std::size_t, std::size_t>> waves;  // [first, end)
  unsigned long long largest = 0;
  for (std::size_t first = 0; first < sources;) {
    const auto limit = host_offsets[first] + budget;
    // The first source past the wave: the first whose end offset exceeds the budget.
    std::size_t end = static_cast<std::size_t>(std::upper_bound(host_offsets.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                                                                host_offsets.end(), limit) -
                                               host_offsets.begin()) - 1;
    if (end <= first) end = first + 1;
    const unsigned long long m = host_offsets[end] - host_offsets[first];
    if (m > static_cast<unsigned long long>(INT_MAX))
      throw Unsupported("cuda.ordered: one source emits more than 2^31 contributions; CUB's run-length encoding counts items in int");
    largest = std::max(largest, m);
    waves.emplace_back(first, end);
    first = end;
  }
  WaveBuffers b(static_cast<std::size_t>(largest), sizeof(T), stream);
  for (const auto& [first, end] : waves) {
    const unsigned long long m = host_offsets[end] - host_offsets[first];
    if (m == 0) continue;
    ordered_wave(stream, b, first, end - first, offsets.get<unsigned long long>(), host_offsets[first], static_cast<int>(m), targets, false, out, en);
  }
}

// fixed_point (fixed_point.h) on the device: three launches and no host round trip. 1. each
// source finds its contributions' largest exponent and count, reduced per warp and then with one
// atomicMax and atomicAdd per warp; 2. each source rounds its contributions onto the grid those
// fix (read on the device) and adds them into 128-bit accumulators with 64-bit integer atomics (a
// second atomic only for a carry or a negative value's high word); 3. one thread per target
// rounds the sum into the output. The arithmetic is fixed_point.h's, shared with cpu.fixed_point,
// so the bits equal the CPU's.
struct FixedStats {
  int e_max;
  unsigned long long total;
};

struct FixedStatEmit {
  int e_max = fixed_point::kNoExponent;
  unsigned long long n = 0;
  template <class V>
  __device__ void operator()(std::size_t, V v) {
    e_max = max(e_max, fixed_point::exponent_of(fixed_point::as_double(v)));
    ++n;
  }
};

struct FixedAddEmit {
  unsigned long long* acc;  // lo, hi per target
  double* special;
  int g;
  template <class V>
  __device__ void operator()(std::size_t t, V value) const {
    const double v = fixed_point::as_double(value);
    if (!isfinite(v)) {
      atomicAdd(special + t, v);
      return;
    }
    const fixed_point::Wide w = fixed_point::to_fixed(v, g);
    const unsigned long long old = atomicAdd(acc + 2 * t, static_cast<unsigned long long>(w.lo));
    const unsigned long long up = w.hi + (old + w.lo < old ? 1ull : 0ull);
    if (up != 0) atomicAdd(acc + 2 * t + 1, up);
  }
};

__global__ inline void fixed_stats_init_kernel(FixedStats* stats) {
  stats->e_max = fixed_point::kNoExponent;
  stats->total = 0;
}

template <class En>
__global__ void fixed_stats_kernel(std::size_t sources, FixedStats* stats, En en) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  FixedStatEmit emit;
  if (s < sources) en(s, emit);
  int e = emit.e_max;
  unsigned long long n = emit.n;
  for (int offset = 16; offset > 0; offset >>= 1) {  // every lane takes part, in range or not
    e = max(e, __shfl_down_sync(0xffffffffu, e, offset));
    n += __shfl_down_sync(0xffffffffu, n, offset);
  }
  if ((threadIdx.x & 31) == 0 && n != 0) {
    atomicMax(&stats->e_max, e);
    atomicAdd(&stats->total, n);
  }
}

template <class En>
__global__ void fixed_add_kernel(std::size_t sources, const FixedStats* stats, unsigned long long* acc, double* special, En en) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= sources) return;
  FixedAddEmit emit{acc, special, fixed_point::grid_exponent(stats->e_max, stats->total)};
  en(s, emit);
}

template <class T>
__global__ void fixed_finish_kernel(std::size_t targets, const FixedStats* stats, const unsigned long long* acc, const double* special,
                                    T* out, bool replace) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t >= targets) return;
  const int g = fixed_point::grid_exponent(stats->e_max, stats->total);
  out[t] = fixed_point::finish<T>(out[t], fixed_point::Wide{acc[2 * t], acc[2 * t + 1]}, special[t], g, replace);
}

template <class T, class En>
void fixed_point_sum(cudaStream_t stream, std::size_t sources, std::size_t targets, T* out, En en, bool replace) {
  if (targets == 0) return;
  DeviceBuffer stats(sizeof(FixedStats), stream), acc(targets * 2 * sizeof(unsigned long long), stream),
      special(targets * sizeof(double), stream);
  fixed_stats_init_kernel<<<1, 1, 0, stream>>>(stats.get<FixedStats>());
  D9M_CUDA_CHECK_LAUNCH();
  D9M_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), stream));
  D9M_CUDA_CHECK(cudaMemsetAsync(special.get(), 0, special.bytes(), stream));  // +0.0
  if (sources != 0) {
    fixed_stats_kernel<<<blocks_for(sources), 256, 0, stream>>>(sources, stats.get<FixedStats>(), en);
    D9M_CUDA_CHECK_LAUNCH();
    fixed_add_kernel<<<blocks_for(sources), 256, 0, stream>>>(sources, stats.get<FixedStats>(), acc.get<unsigned long long>(),
                                                              special.get<double>(), en);
    D9M_CUDA_CHECK_LAUNCH();
  }
  fixed_finish_kernel<T><<<blocks_for(targets), 256, 0, stream>>>(targets, stats.get<FixedStats>(), acc.get<unsigned long long>(),
                                                                  special.get<double>(), out, replace);
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T = float, class En>
void apply(Order order, const KernelArgs& a, std::size_t sources, En en) {
  auto stream = static_cast<cudaStream_t>(a.exec.stream);
  if (order == Order::atomic) atomic(stream, sources, a.out<T>(), en);
  else if (order == Order::fixed_point) {
    if constexpr (std::is_integral_v<T>) throw std::logic_error("fixed_point: integer outputs are exact in any order already");
    else fixed_point_sum(stream, sources, static_cast<std::size_t>(a.problem.output.numel()), a.out<T>(), en, false);
  } else ordered(stream, sources, static_cast<std::size_t>(a.problem.output.numel()), a.out<T>(), en, a.problem.contributions);
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
  } else if (order == Order::fixed_point) {
    fixed_point_sum(static_cast<cudaStream_t>(a.exec.stream), sources, static_cast<std::size_t>(a.problem.output.numel()), a.out<T>(), en,
                    true);
  } else {
    const auto stream = static_cast<cudaStream_t>(a.exec.stream);
    const auto n = static_cast<std::size_t>(a.problem.output.numel());
    if (n == 0) return;
    DeviceBuffer acc(n * sizeof(Acc<T>), stream);
    D9M_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), stream));  // +0.0f
    if (order == Order::atomic) accumulate::cuda::atomic(stream, sources, acc.get<Acc<T>>(), en);
    else accumulate::cuda::ordered(stream, sources, n, acc.get<Acc<T>>(), en, a.problem.contributions);
    narrow_kernel<T><<<blocks_for(n), 256, 0, stream>>>(acc.get<Acc<T>>(), a.out<T>(), n);
    D9M_CUDA_CHECK_LAUNCH();
  }
}

// cuda.atomic and cuda.ordered of an op in scatter form, for D9M_REGISTER_VARIANTS. run(a, order)
// initialises the output (on a.exec.stream) and calls apply(). cuda.ordered claims the bits of
// cpu.ordered.
std::vector<VariantDef> cuda_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run);
// cuda.fixed_point, claiming cpu.fixed_point's bits, for the families with cpu_fixed_point_variant.
std::vector<VariantDef> cuda_fixed_point_variant(const std::string& op, std::function<void(const KernelArgs&, Order)> run);

}  // namespace d9m::accumulate::cuda
