// histogram family, TensorFlow semantics (tf.math.bincount with minlength = maxlength = bins):
//   bincount(arr[N] int32; bins)                        -> counts[bins] int32
//   bincount_weighted(arr[N] int32, weights[N]; bins)   -> sums[bins] in the config's dtype
// counts[b] = the number of i with arr[i] == b, sums[b] = the sum of weights[i] over them, added
// in increasing i (the reference order), one rounding per add in the dtype. Values >= bins are
// ignored (maxlength) and TensorFlow refuses negative ones, so the fill draws arr in
// [0, bins + bins / 8): about one value in nine is dropped.
// Integer counts are exact in any order: the atomic variants of bincount are deterministic by
// construction (and claim it); float weights are not, and bincount_weighted's race. The status
// table shows the difference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/common/hd.h"

namespace d9m::histogram {

struct Geometry {
  std::int64_t n = 0, bins = 0;
};

// Scatter form: source i adds into bin arr[i], if it is a bin: 1 when T is the int32 count,
// weights[i] when T is a float type.
template <class T>
struct BinValues {
  Geometry g;
  const std::int32_t* arr;
  const T* weights;  // unused for counts

  template <class Emit>
  D9M_HD void operator()(std::size_t i, Emit& emit) const {
    const std::int32_t b = arr[i];
    if (b < 0 || b >= g.bins) return;
    if constexpr (std::is_same_v<T, std::int32_t>) emit(static_cast<std::size_t>(b), std::int32_t{1});
    else emit(static_cast<std::size_t>(b), weights[i]);
  }
};

}  // namespace d9m::histogram
