// segment family, TensorFlow semantics (segment_reduction_ops: SegmentSum, SegmentMean,
// SegmentProd, SegmentMax), values in the config's dtype, int32 segment ids sorted ascending:
//   segment_<r>(data[R,D], segment_ids[R]; num_segments S) -> output[S,D]
//   output[s,:] = the reduction of the rows data[r,:] with segment_ids[r] == s, in increasing r
// TensorFlow sizes the output segment_ids[R-1] + 1; here S is a parameter and the fill makes the
// last id S - 1 (ids drawn in [0, S) and sorted: segment lengths vary and some are empty).
// Empty segments hold what TensorFlow writes there: 0 (sum, mean, max), 1 (prod). SegmentMax's
// documentation: "If the max is empty for a given segment ID i, output[i] = 0" (its CPU kernel
// registers 0 as the empty value, its GPU kernel starts from lowest and writes 0 where a segment
// is empty); the dtype's lowest finite value is UnsortedSegmentMax's, not this op's (found by an
// oracle audit: an earlier version filled empty max segments with lowest()).
// Every step is one operation in the dtype with one rounding (half.h add/mul), as the atomics of
// TensorFlow's GPU kernels on T; mean is the segment's sum divided by its row count, in Acc<T>,
// rounded once. max is exact in any order, so its atomic variants are deterministic by
// construction, and claim it: an atomic is not proof of nondeterminism.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::segment {

enum class Reduction { sum, mean, prod, max };

struct Geometry {
  std::int64_t rows = 0, depth = 0, segments = 0;
  Reduction reduction = Reduction::sum;
};

// The value a segment starts from (an empty one ends as last_step() says).
template <class T>
D9M_HD inline T identity(Reduction r) {
  switch (r) {
    case Reduction::prod: return from_float<T>(1.0f);
    case Reduction::max: return lowest_finite<T>();
    default: return T{};  // +0: all bits zero in every float type
  }
}

// One step of the reduction: acc op value, one rounding.
template <class T>
D9M_HD inline T combine(Reduction r, T acc, T value) {
  switch (r) {
    case Reduction::prod: return mul(acc, value);
    case Reduction::max: return widen(value) > widen(acc) ? value : acc;
    default: return add(acc, value);
  }
}

// mean's last step: the sum over `count` rows divided by the count (0 for an empty segment).
template <class T>
D9M_HD inline T mean_of(T sum, std::int64_t count) {
  if (count == 0) return T{};
  return narrow<T>(widen(sum) / static_cast<Acc<T>>(count));
}

// Whether an output needs a last step once its segment's `count` rows are folded in: mean's
// division, and max's empty segments, which started from lowest_finite() and are 0.
D9M_HD inline bool has_last_step(Reduction r) { return r == Reduction::mean || r == Reduction::max; }
template <class T>
D9M_HD inline T last_step(Reduction r, T acc, std::int64_t count) {
  if (r == Reduction::mean) return mean_of(acc, count);
  if (r == Reduction::max && count == 0) return T{};  // +0
  return acc;
}

// First row of segment s: the number of ids below s (the ids are sorted).
D9M_HD inline std::int64_t segment_start(const std::int32_t* ids, std::int64_t rows, std::int64_t s) {
  std::int64_t lo = 0, hi = rows;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (ids[mid] < s) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Output element (s, k) by gathering its segment's rows in increasing r: the reference order,
// with memory that grows with the output only (the ordered variants).
template <class T>
D9M_HD inline T gather(const Geometry& g, const T* data, const std::int32_t* ids, std::int64_t s, std::int64_t k) {
  const std::int64_t begin = segment_start(ids, g.rows, s), end = segment_start(ids, g.rows, s + 1);
  T acc = identity<T>(g.reduction);
  for (std::int64_t r = begin; r < end; ++r) acc = combine(g.reduction, acc, data[r * g.depth + k]);
  return last_step(g.reduction, acc, end - begin);
}

}  // namespace d9m::segment
