// Three ways to apply an op written in scatter form.
//
// An op in scatter form has sources s in [0, sources); source s emits contributions
// (target, value) in a fixed order by calling emit(target, value). The op's result is
//   out[t] = init[t] + the contributions to t, added one at a time
// and the order of those additions is what distinguishes the variants:
//
//   serial   s ascending, emission order within s: the reference order that defines the op.
//   atomic   tasks of a few sources run on all worker threads and add with atomic float adds;
//            the order of adds into one target is whatever the scheduler produced.
//   ordered  contributions are collected per fixed chunk of sources, bucketed stably by fixed
//            target range, and each range is summed by one task in bucket order. Bucketing is
//            stable, so every target receives its contributions exactly in serial order: the
//            result is bit-identical to serial on any thread count. This is the CPU analogue of
//            "sort by index, then a fixed-order segmented reduction" on a GPU.
//
// The enumerator is called as en(s, emit) and must be a pure function of s.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/common/half.h"

#include "kernels/common/thread_pool.h"
#include "kernels/registry.h"

namespace d9m::accumulate {

// Sources per task of the atomic variant: small, so that threads interleave finely and many
// adds race for one address, as on a GPU.
inline constexpr std::size_t kAtomicGrain = 16;
// Sources per chunk of the ordered variant. Fixed, not derived from the thread count.
inline constexpr std::size_t kOrderedChunk = 512;
// Target ranges of the ordered variant's bucketing (at most this many).
inline constexpr std::size_t kOrderedRanges = 256;

// The storage type T of the output is float (every family), or double, Half or BFloat16 (the
// families that run at other precisions), or int32 (histogram counts, exact in any order). Each
// contribution is added in T with one rounding (half.h add()), as the frameworks' atomicAdd on
// __half does: the order of adds shows in every float type, most in the 16-bit ones.

template <class T, class Enumerate>
void serial(std::size_t sources, T* out, Enumerate&& en) {
  auto emit = [out](std::size_t t, T v) { out[t] = add(out[t], v); };
  for (std::size_t s = 0; s < sources; ++s) en(s, emit);
}

// One atomic add in T: fetch_add for float, double and int32 counters, a compare-and-swap loop on
// the bits for the 16-bit types (as CUDA's atomicAdd on __half is built where the hardware lacks one).
template <class T>
void atomic_add(T* p, T v) {
  if constexpr (std::is_floating_point_v<T> || std::is_integral_v<T>) {
    std::atomic_ref<T>(*p).fetch_add(v, std::memory_order_relaxed);
  } else {
    std::atomic_ref<std::uint16_t> bits(p->bits);
    std::uint16_t seen = bits.load(std::memory_order_relaxed);
    while (!bits.compare_exchange_weak(seen, add(T{seen}, v).bits, std::memory_order_relaxed)) {
    }
  }
}

template <class T, class Enumerate>
void atomic(ThreadPool& pool, std::size_t sources, T* out, Enumerate&& en) {
  const std::size_t tasks = (sources + kAtomicGrain - 1) / kAtomicGrain;
  pool.parallel_for(tasks, [&](std::size_t task) {
    auto emit = [out](std::size_t t, T v) { atomic_add(out + t, v); };
    const std::size_t end = std::min(sources, (task + 1) * kAtomicGrain);
    for (std::size_t s = task * kAtomicGrain; s < end; ++s) en(s, emit);
  });
}

template <class T, class Enumerate>
void ordered(ThreadPool& pool, std::size_t sources, std::size_t targets, T* out,
             Enumerate&& en) {
  struct Contribution {
    std::uint32_t target;
    T value;
  };
  if (sources == 0 || targets == 0) return;
  const std::size_t chunks = (sources + kOrderedChunk - 1) / kOrderedChunk;
  const std::size_t ranges = std::min(targets, kOrderedRanges);
  const std::size_t range_width = (targets + ranges - 1) / ranges;

  // 1. Each chunk collects its contributions in emission order and counts them per range.
  std::vector<std::vector<Contribution>> collected(chunks);
  std::vector<std::size_t> counts(chunks * ranges, 0);
  pool.parallel_for(chunks, [&](std::size_t c) {
    auto& mine = collected[c];
    std::size_t* count = &counts[c * ranges];
    auto emit = [&](std::size_t t, T v) {
      mine.push_back({static_cast<std::uint32_t>(t), v});
      ++count[t / range_width];
    };
    const std::size_t end = std::min(sources, (c + 1) * kOrderedChunk);
    for (std::size_t s = c * kOrderedChunk; s < end; ++s) en(s, emit);
  });

  // 2. Bucket offsets in (range, chunk) order: within a range, chunks keep source order.
  std::vector<std::size_t> offset(chunks * ranges);
  std::vector<std::size_t> range_begin(ranges + 1, 0);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranges; ++r) {
    range_begin[r] = total;
    for (std::size_t c = 0; c < chunks; ++c) {
      offset[c * ranges + r] = total;
      total += counts[c * ranges + r];
    }
  }
  range_begin[ranges] = total;

  // 3. Stable scatter of each chunk's contributions into the buckets.
  std::vector<Contribution> bucketed(total);
  pool.parallel_for(chunks, [&](std::size_t c) {
    std::size_t* next = &offset[c * ranges];
    for (const Contribution& k : collected[c]) bucketed[next[k.target / range_width]++] = k;
  });

  // 4. One task per range adds its bucket in order: per target, exactly the serial order.
  pool.parallel_for(ranges, [&](std::size_t r) {
    for (std::size_t i = range_begin[r]; i < range_begin[r + 1]; ++i)
      out[bucketed[i].target] = add(out[bucketed[i].target], bucketed[i].value);
  });
}

enum class Order { serial, atomic, ordered };

// Applies an op in scatter form to a.out<T>() (already initialised by the caller).
template <class T = float, class Enumerate>
void apply(Order order, const KernelArgs& a, std::size_t sources, Enumerate&& en) {
  T* out = a.out<T>();
  switch (order) {
    case Order::serial: serial(sources, out, en); break;
    case Order::atomic: atomic(*a.exec.pool, sources, out, en); break;
    case Order::ordered:
      ordered(*a.exec.pool, sources, static_cast<std::size_t>(a.problem.output.numel()), out, en);
      break;
  }
}

// apply() for an op whose contributions are summed in Acc<T> (float at f16 and bf16) and whose
// outputs are rounded once to T at the end, as cuDNN's convolution backprops do with a float
// compute type: the sums go into a zeroed float buffer, then every output is narrowed. At f32
// and f64 this is apply<T> on a.out<T>() (which the caller initialises).
template <class T, class Enumerate>
void apply_widened(Order order, const KernelArgs& a, std::size_t sources, Enumerate&& en) {
  if constexpr (std::is_same_v<Acc<T>, T>) {
    apply<T>(order, a, sources, en);
  } else {
    const auto n = static_cast<std::size_t>(a.problem.output.numel());
    std::vector<Acc<T>> acc(n, Acc<T>{0});
    KernelArgs wide{a.problem, a.inputs, acc.data(), a.exec, a.state, a.choice};
    apply<Acc<T>>(order, wide, sources, en);
    T* out = a.out<T>();
    for (std::size_t i = 0; i < n; ++i) out[i] = narrow<T>(acc[i]);
  }
}

// cpu.serial, cpu.atomic and cpu.ordered of an op written in scatter form, with the claims every
// such triple shares, for D9M_REGISTER_VARIANTS. run(a, order) initialises the output and calls
// apply().
std::vector<VariantDef> cpu_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run);

}  // namespace d9m::accumulate
