// reduce family: the reductions CUB (CCCL) offers with determinism levels, on a 1-D vector x[N]:
//   reduce_sum(x)                 -> sum[1]      = x[0] + ... + x[N-1]          (tf.reduce_sum, cub::DeviceReduce::Sum)
//   cumsum(x)                     -> out[N], out[i] = x[0] + ... + x[i]         (tf.cumsum, inclusive; cub::DeviceScan)
//   segmented_reduce(x, offsets)  -> sums[S], sums[s] = x[offsets[s]] + ... + x[offsets[s+1]-1]
//        (tf.math.segment_sum with the segments given as CSR offsets; cub::DeviceSegmentedReduce::Sum).
//        offsets[0] = 0, offsets[S] = N, non-decreasing; an empty segment sums to +0. The offsets
//        are an input drawn from the seed: segment weights span four orders of magnitude and about
//        one segment in five is empty.
// The adds are done in the dtype, f32 or f64, as CUB's Sum does (its accumulator is the input's
// type). The reference (cpu.serial) adds in ascending index from +0.
//
// dtypes: f32 and f64. f16 and bf16 are left out: CUB's Sum would accumulate in the 16-bit type
// (a 2^22-element f16 sum overflows at 65504), the frameworks sum 16-bit tensors in f32 with
// kernels of their own, and CCCL 3.3 runs a 16-bit not_guaranteed request as run_to_run (atomics
// under 4 bytes are emulated) and offers gpu_to_gpu sums for float and double only: no level
// would be tested as named.
//
// d9m's own variants share one fixed arrangement of the adds, written once below for the CPU and
// the GPU (a thread block of kThreads threads is kThreads lanes on the CPU):
//   chunk     kChunk = kThreads * kItems consecutive elements. Lane t adds elements t, t + kThreads,
//             t + 2 kThreads, ... of the chunk in that order, from +0; the kThreads lane sums are
//             then halved pairwise, p[t] += p[t + h] for h = kThreads/2, ..., 1: the chunk's sum.
//   levels    reduce_sum: the chunk sums of x, then the chunk sums of those, until one value is
//             left (cpu.ordered, cuda.ordered).
//   segments  segmented_reduce, ordered: each segment's levels, its chunks counted from its
//             first element.
//   scan      cumsum: lane t of chunk c owns kItems consecutive elements; it adds them in order
//             from +0 (local[i], and the lane total). The lane prefix is the lane totals of the
//             chunk added in lane order from +0; the chunk total is the last lane prefix plus the
//             last lane total. carry[c] is the chunk totals of chunks 0..c-1 added in chunk
//             order. Then out[i] = (carry[c] + lane prefix) + local[i].
// The atomic variants replace the fixed top of each arrangement with atomic adds in the order
// the scheduler gets there. cuda.atomic: each block adds its chunk sum into the one output
// (reduce_sum), its chunk total into the carry of every later chunk (cumsum), or its piece of
// each segment, summed as a chunk, into the segment's sum (segmented_reduce; global chunk g is
// [g kChunk, (g+1) kChunk) of x, so only segments crossing chunk boundaries race). cpu.atomic
// adds per lane instead (reduce_cpu.cpp says why): lane partials into the output, lane totals
// into their chunk's total before the chunk totals go into the later carries, and lane partials
// of each segment's pieces into the segment's sum.
// None of these is cpu.serial's association, so their bits differ from the reference; the
// ordered variants' bits depend on nothing but the inputs, and cuda.ordered claims cpu.ordered's.
//
// Tolerance: |variant - serial| <= 1e-3 (1 + max|serial|) in f32 (x 2^-29 in f64). A correct
// reordering differs from the serial sum by the serial sum's own rounding error, which grows as
// u N rms(x) (u the unit roundoff) while the sum of zero-mean inputs grows as sqrt(N) rms(x): the
// bound is relative to the sum, so it must grow as u sqrt(N). On this family's inputs (mixed
// magnitudes, 32 binades) the tree sums differed from the serial one by at most 1.8e-4 (f32) /
// 2.2e-4 (f64, scaled by 2^29) of (1 + |sum|) at N = 2^22 and 3e-4 / 5.2e-4 at N = 2^24, over
// eight seeds each: 1e-3 holds up to 2^24 with a factor of two to spare (beyond, the bound would
// have to grow with sqrt(N)). Scans are checked per element against 1 + max|prefix|: less tight.
// A wrong sum is caught as far as its error exceeds that: a dropped chunk of 4096 elements
// (about 7.5 rms, against a bound of about 0.3 at N = 2^22) fails unless that chunk happens to
// sum to nearly zero, which the inputs' cancellation allows: on the default 2^22 configs 1016 of
// the 1024 possible dropped chunks fail in f32 and all 1024 in f64 (suites/unit/reduce_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/hd.h"

namespace d9m::reduce {

// The fixed arrangement (never derived from the machine): a block of 256 threads, 16 elements each.
inline constexpr int kThreads = 256;
inline constexpr int kItems = 16;
inline constexpr std::int64_t kChunk = std::int64_t{kThreads} * kItems;

// Binades the random inputs of x span (kernels/common/fill.h mixed_magnitude_floats).
inline constexpr unsigned kInputBinades = 32;

struct Geometry {
  std::int64_t n = 0;         // elements of x
  std::int64_t segments = 0;  // S, segmented_reduce only

  D9M_HD std::int64_t chunks() const { return (n + kChunk - 1) / kChunk; }
};

D9M_HD inline std::int64_t chunks_of(std::int64_t count) { return (count + kChunk - 1) / kChunk; }

// Lane t's sum of a chunk of `len` elements (len <= kChunk) starting at x: elements t,
// t + kThreads, ... in that order, from +0.
template <class T>
D9M_HD inline T lane_sum(const T* x, std::int64_t len, int lane) {
  T acc = T(0);
  for (int j = 0; j < kItems; ++j) {
    const std::int64_t i = std::int64_t{j} * kThreads + lane;
    if (i < len) acc = acc + x[i];
  }
  return acc;
}

// The pairwise halving of kThreads lane sums in p, in place; the chunk's sum ends in p[0].
template <class T>
inline void halve_lanes(T* p) {
  for (int h = kThreads / 2; h > 0; h /= 2)
    for (int t = 0; t < h; ++t) p[t] = p[t] + p[t + h];
}

// The chunk sum on the host (the device runs lane_sum per thread and the same halving in shared
// memory).
template <class T>
inline T chunk_sum(const T* x, std::int64_t len) {
  T p[kThreads];
  for (int t = 0; t < kThreads; ++t) p[t] = lane_sum(x, len, t);
  halve_lanes(p);
  return p[0];
}

// Scan lanes: lane t of a chunk owns elements [t kItems, (t+1) kItems) of it.
template <class T>
D9M_HD inline T lane_total(const T* chunk, std::int64_t len, int lane) {
  T acc = T(0);
  for (int k = 0; k < kItems; ++k) {
    const std::int64_t i = std::int64_t{lane} * kItems + k;
    if (i < len) acc = acc + chunk[i];
  }
  return acc;
}

// Lane prefixes of one chunk from its lane totals (in place: totals -> exclusive prefixes), and
// the chunk's total.
template <class T>
D9M_HD inline T lane_prefixes(T* lanes) {
  T run = T(0);
  for (int t = 0; t < kThreads; ++t) {
    const T total = lanes[t];
    lanes[t] = run;
    run = run + total;
  }
  return run;
}

// Lane t's outputs: out[i] = (carry + prefix) + local[i], local the lane's running sum from +0.
template <class T>
D9M_HD inline void lane_outputs(const T* chunk, T* out, std::int64_t len, int lane, T carry, T prefix) {
  const T base = carry + prefix;
  T local = T(0);
  for (int k = 0; k < kItems; ++k) {
    const std::int64_t i = std::int64_t{lane} * kItems + k;
    if (i >= len) break;
    local = local + chunk[i];
    out[i] = base + local;
  }
}

// Index of the segment that holds element i: the last s with offsets[s] <= i < offsets[s+1]
// (empty segments before it skipped), by binary search over offsets[0..S].
D9M_HD inline std::int64_t segment_of(const std::int32_t* offsets, std::int64_t segments, std::int64_t i) {
  std::int64_t lo = 0, hi = segments;  // offsets[lo] <= i < offsets[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= i) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace d9m::reduce
