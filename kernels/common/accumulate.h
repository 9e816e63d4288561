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
//   ordered  contributions are collected per chunk of sources, bucketed stably by fixed target
//            range, and each range is summed by one task in bucket order; sources run in waves of
//            chunks, so only a wave's contributions are buffered at once. Bucketing is stable and
//            waves follow source order, so every target receives its contributions exactly in
//            serial order: the result is bit-identical to serial on any thread count (and any
//            chunk or wave size). This is the CPU analogue of "sort by index, then a fixed-order
//            segmented reduction" on a GPU.
//
// The enumerator is called as en(s, emit) and must be a pure function of s.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/common/fixed_point.h"
#include "kernels/common/half.h"

#include "kernels/common/thread_pool.h"
#include "kernels/registry.h"

namespace d9m::accumulate {

// Sources per task of the atomic variant: small, so that threads interleave finely and many
// adds race for one address, as on a GPU.
inline constexpr std::size_t kAtomicGrain = 16;
// Sources per chunk of the ordered variant, at most (fewer where each source emits many
// contributions: plan_waves). Never derived from the thread count.
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

// Contributions the ordered variant buffers at once (collected and bucketed: two copies of 8
// bytes each, 16 for f64). Sources run in waves of whole chunks: a wave's contributions are
// bucketed and added into the output before the next wave's are collected. Every target still
// receives its contributions in source order, so neither the wave nor the chunk size can change
// a bit (only the memory and the speed), and memory stays bounded however many contributions
// the op emits (a ResNet convolution's backprop emits billions).
inline constexpr std::uint64_t kOrderedWaveContributions = std::uint64_t{1} << 24;

// The working memory of ordered() on a problem: its buffers at the wave budget (or at the plan's
// bound, when that is smaller), in bytes.
std::uint64_t ordered_buffer_bytes(const Problem& p);

// Sources per chunk and chunks per wave for `sources` sources emitting at most `bound`
// contributions in all (0: unknown). From the bound's average per source: chunks of at most
// kOrderedChunk sources with room for several in a wave, and as many chunks in a wave as the
// budget holds. Without a bound: kOrderedChunk, and the next wave sized by what was seen.
struct WavePlan {
  std::size_t chunk = kOrderedChunk;
  std::size_t first_wave = 0;  // chunks in the first wave
};
inline WavePlan plan_waves(std::size_t sources, std::uint64_t bound, std::uint64_t budget) {
  WavePlan w;
  const std::uint64_t per_source = bound == 0 ? 1 : std::max<std::uint64_t>(1, (bound + sources - 1) / sources);
  w.chunk = static_cast<std::size_t>(std::clamp<std::uint64_t>(budget / (8 * per_source), 1, kOrderedChunk));
  w.first_wave = static_cast<std::size_t>(std::max<std::uint64_t>(1, budget / (w.chunk * per_source)));
  return w;
}

// `bound` is the problem's Problem::contributions: exceeding it is a bug in the op's plan (its
// memory estimate would be wrong), reported as an error rather than ignored. `budget` is the
// wave budget (a parameter so that the tests can make waves small).
template <class T, class Enumerate>
void ordered(ThreadPool& pool, std::size_t sources, std::size_t targets, T* out, Enumerate&& en,
             std::uint64_t bound = 0, std::uint64_t budget = kOrderedWaveContributions) {
  struct Contribution {
    std::uint32_t target;
    T value;
  };
  if (sources == 0 || targets == 0) return;
  const std::size_t ranges = std::min(targets, kOrderedRanges);
  const std::size_t range_width = (targets + ranges - 1) / ranges;
  const WavePlan plan = plan_waves(sources, bound, budget);
  const std::size_t chunks = (sources + plan.chunk - 1) / plan.chunk;

  std::vector<std::vector<Contribution>> collected;
  std::vector<std::size_t> counts, offset, range_begin(ranges + 1);
  std::vector<Contribution> bucketed;
  std::uint64_t emitted = 0;
  std::size_t next_wave = plan.first_wave;
  for (std::size_t first = 0; first < chunks;) {
    const std::size_t wave = std::min(next_wave, chunks - first);
    // 1. Each chunk of the wave collects its contributions in emission order and counts them
    //    per range.
    collected.assign(wave, {});
    counts.assign(wave * ranges, 0);
    pool.parallel_for(wave, [&](std::size_t c) {
      auto& mine = collected[c];
      std::size_t* count = &counts[c * ranges];
      auto emit = [&](std::size_t t, T v) {
        mine.push_back({static_cast<std::uint32_t>(t), v});
        ++count[t / range_width];
      };
      const std::size_t begin = (first + c) * plan.chunk, end = std::min(sources, begin + plan.chunk);
      for (std::size_t s = begin; s < end; ++s) en(s, emit);
    });

    // 2. Bucket offsets in (range, chunk) order: within a range, chunks keep source order.
    offset.assign(wave * ranges, 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < ranges; ++r) {
      range_begin[r] = total;
      for (std::size_t c = 0; c < wave; ++c) {
        offset[c * ranges + r] = total;
        total += counts[c * ranges + r];
      }
    }
    range_begin[ranges] = total;
    emitted += total;
    if (bound != 0 && emitted > bound)
      throw std::logic_error("the op emitted more contributions than its plan's bound (Problem::contributions = " +
                             std::to_string(bound) + ")");

    // 3. Stable scatter of each chunk's contributions into the buckets.
    bucketed.resize(total);
    pool.parallel_for(wave, [&](std::size_t c) {
      std::size_t* next = &offset[c * ranges];
      for (const Contribution& k : collected[c]) bucketed[next[k.target / range_width]++] = k;
    });

    // 4. One task per range adds its bucket in order onto what earlier waves left: per target,
    //    exactly the serial order.
    pool.parallel_for(ranges, [&](std::size_t r) {
      for (std::size_t i = range_begin[r]; i < range_begin[r + 1]; ++i)
        out[bucketed[i].target] = add(out[bucketed[i].target], bucketed[i].value);
    });

    // The next wave holds as many chunks as the budget does at the density seen so far.
    first += wave;
    const double per_chunk = std::max(1.0, static_cast<double>(emitted) / static_cast<double>(first));
    next_wave = static_cast<std::size_t>(std::max(1.0, static_cast<double>(budget) / per_chunk));
  }
}

// fixed_point (fixed_point.h): every contribution rounded onto one grid and added as a 128-bit
// integer with atomic adds from worker threads in scheduler order, as `atomic` races; integer
// adds commute, so the bits are the same on any thread count, and the device's variant gives the
// same bits (cuda.fixed_point). Not serial's bits: one rounding at the end instead of one per add.
// Two passes over the sources: the first finds the grid (the largest exponent, the count).
// `replace`: the output is the rounded sum (apply_widened's form) rather than init plus it.
template <class T, class Enumerate>
void fixed_point_sum(ThreadPool& pool, std::size_t sources, std::size_t targets, T* out, Enumerate&& en, bool replace) {
  using fixed_point::Wide;
  if (targets == 0) return;
  const std::size_t tasks = (sources + kAtomicGrain - 1) / kAtomicGrain;
  std::atomic<int> e_max{fixed_point::kNoExponent};
  std::atomic<std::uint64_t> total{0};
  pool.parallel_for(tasks, [&](std::size_t task) {
    int mine = fixed_point::kNoExponent;
    std::uint64_t count = 0;
    auto emit = [&](std::size_t, auto v) {
      mine = std::max(mine, fixed_point::exponent_of(fixed_point::as_double(v)));
      ++count;
    };
    const std::size_t end = std::min(sources, (task + 1) * kAtomicGrain);
    for (std::size_t s = task * kAtomicGrain; s < end; ++s) en(s, emit);
    total.fetch_add(count, std::memory_order_relaxed);
    for (int seen = e_max.load(std::memory_order_relaxed); mine > seen && !e_max.compare_exchange_weak(seen, mine);) {
    }
  });
  const int g = fixed_point::grid_exponent(e_max.load(), total.load());
  std::vector<Wide> acc(targets);
  std::vector<double> special(targets, 0.0);
  pool.parallel_for(tasks, [&](std::size_t task) {
    auto emit = [&](std::size_t t, auto value) {
      const double v = fixed_point::as_double(value);
      if (!std::isfinite(v)) {
        std::atomic_ref<double>(special[t]).fetch_add(v, std::memory_order_relaxed);
        return;
      }
      const Wide w = fixed_point::to_fixed(v, g);
      const std::uint64_t old = std::atomic_ref<std::uint64_t>(acc[t].lo).fetch_add(w.lo, std::memory_order_relaxed);
      // The carry out of the low word belongs to this add alone, whatever else raced.
      if (const std::uint64_t up = w.hi + (old + w.lo < old ? 1 : 0); up != 0)
        std::atomic_ref<std::uint64_t>(acc[t].hi).fetch_add(up, std::memory_order_relaxed);
    };
    const std::size_t end = std::min(sources, (task + 1) * kAtomicGrain);
    for (std::size_t s = task * kAtomicGrain; s < end; ++s) en(s, emit);
  });
  pool.parallel_for((targets + 4095) / 4096, [&](std::size_t chunk) {
    const std::size_t end = std::min(targets, (chunk + 1) * 4096);
    for (std::size_t t = chunk * 4096; t < end; ++t) out[t] = fixed_point::finish<T>(out[t], acc[t], special[t], g, replace);
  });
}

// The working memory of fixed_point_sum: a 128-bit accumulator and a double per output element.
inline std::uint64_t fixed_point_buffer_bytes(const Problem& p) { return 24 * static_cast<std::uint64_t>(p.output.numel()); }

enum class Order { serial, atomic, ordered, fixed_point };

// Applies an op in scatter form to a.out<T>() (already initialised by the caller).
template <class T = float, class Enumerate>
void apply(Order order, const KernelArgs& a, std::size_t sources, Enumerate&& en) {
  T* out = a.out<T>();
  switch (order) {
    case Order::serial: serial(sources, out, en); break;
    case Order::atomic: atomic(*a.exec.pool, sources, out, en); break;
    case Order::ordered:
      ordered(*a.exec.pool, sources, static_cast<std::size_t>(a.problem.output.numel()), out, en, a.problem.contributions);
      break;
    case Order::fixed_point:
      if constexpr (std::is_integral_v<T>) throw std::logic_error("fixed_point: integer outputs are exact in any order already");
      else fixed_point_sum(*a.exec.pool, sources, static_cast<std::size_t>(a.problem.output.numel()), out, en, false);
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
  } else if (order == Order::fixed_point) {
    // The sum is exact already: rounded once, to T, with no float accumulator between.
    fixed_point_sum(*a.exec.pool, sources, static_cast<std::size_t>(a.problem.output.numel()), a.out<T>(), en, true);
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
// cpu.fixed_point of such an op, for the families whose run(a, order) hands the order to apply()
// or apply_widened() unchanged.
std::vector<VariantDef> cpu_fixed_point_variant(const std::string& op, std::function<void(const KernelArgs&, Order)> run);

}  // namespace d9m::accumulate
