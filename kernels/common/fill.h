// Input fillers shared by the op families, all on CounterRng so inputs are byte-identical on
// every machine. Each input has its own generator stream (its argument index).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/common/counter_rng.h"
#include "kernels/registry.h"

namespace d9m::fill {

// Exact mode draws integers in [-kExactRange, kExactRange]: small enough that every sum in
// every catalogued op stays exact in float32 (2^24 headroom), so summation order cannot show.
inline constexpr std::int32_t kExactRange = 4;

// Floats in [-1, 1) on the 2^-23 grid (random), or small integers (exact).
inline void floats(FillTarget& t, FillMode mode) {
  const CounterRng rng(t.seed, t.stream);
  auto* p = static_cast<float*>(t.data);
  const auto n = static_cast<std::uint64_t>(t.desc.numel());
  for (std::uint64_t i = 0; i < n; ++i)
    p[i] = mode == FillMode::random
               ? rng.unit_symmetric(i)
               : static_cast<float>(static_cast<std::int32_t>(rng.below(i, 2 * kExactRange + 1)) -
                                    kExactRange);
}

// Floats of mixed magnitudes (random), or small integers (exact): unit_symmetric(i) scaled by
// 2^-e, e in [0, binades) taken from the low bits of the same draw (unit_symmetric reads the top
// 24). Values of [-1, 1) on a 2^-23 grid make every f64 sum of up to 2^29 of them exact, so no
// summation order could show in f64; spread over 32 binades their bits reach 2^-54, and long
// sums round in f64 as they do in f32. The scaling by a power of two is exact (no subnormals).
inline void mixed_magnitude_floats(FillTarget& t, FillMode mode, unsigned binades) {
  if (mode == FillMode::exact || binades <= 1) return floats(t, mode);
  const CounterRng rng(t.seed, t.stream);
  auto* p = static_cast<float*>(t.data);
  const auto n = static_cast<std::uint64_t>(t.desc.numel());
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto e = static_cast<int>(rng.bits(i) % binades);
    p[i] = rng.unit_symmetric(i) * (1.0f / static_cast<float>(std::uint64_t{1} << e));
  }
}

// Integers in [lo, hi).
inline void integers(FillTarget& t, std::int32_t lo, std::int32_t hi) {
  const CounterRng rng(t.seed, t.stream);
  auto* p = static_cast<std::int32_t*>(t.data);
  const auto n = static_cast<std::uint64_t>(t.desc.numel());
  const auto span = static_cast<std::uint32_t>(hi - lo);
  for (std::uint64_t i = 0; i < n; ++i) p[i] = lo + static_cast<std::int32_t>(rng.below(i, span));
}

// Integers in [0, n) by Zipf's law with exponent 1: k with probability (1 / (k + 1)) / H_n, so
// 0 is drawn about k + 1 times as often as k. The frequencies of
// words (and of the word pieces of a tokenised text) fall off so, roughly: a model's embedding
// gradient sends hundreds of a batch's tokens to its few frequent rows, where uniform ids would
// send two or three to any row (and two contributions add in either order to the same bits).
// Specified bit for bit: the cumulative weights c_k = sum_{j <= k} 1 / (j + 1) in double, added in
// ascending j (correctly rounded divisions and adds only, no library function), the thresholds
// t_k = floor(c_k / c_{n-1} * 2^63) (so t_{n-1} = 2^63), and draw i is the least k with
// (bits(i) >> 1) < t_k.
// One vector of 8 bytes a value: c_k is computed again in the second pass, by the same adds in the
// same order, so it has the same bits as the first pass's (which only needs the total).
inline std::vector<std::uint64_t> zipf_thresholds(std::int32_t n) {
  std::vector<std::uint64_t> thresholds(static_cast<std::size_t>(std::max(n, 0)));
  double sum = 0;
  for (std::size_t k = 0; k < thresholds.size(); ++k) sum += 1.0 / static_cast<double>(k + 1);
  double c = 0;
  for (std::size_t k = 0; k < thresholds.size(); ++k) {
    c += 1.0 / static_cast<double>(k + 1);
    thresholds[k] = static_cast<std::uint64_t>(c / sum * 0x1p63);
  }
  return thresholds;
}

inline void zipf_integers(FillTarget& t, std::int32_t n) {
  const CounterRng rng(t.seed, t.stream);
  const std::vector<std::uint64_t> thresholds = zipf_thresholds(n);
  auto* p = static_cast<std::int32_t*>(t.data);
  const auto count = static_cast<std::uint64_t>(t.desc.numel());
  for (std::uint64_t i = 0; i < count; ++i)
    p[i] = static_cast<std::int32_t>(std::upper_bound(thresholds.begin(), thresholds.end(), rng.bits(i) >> 1) - thresholds.begin());
}

}  // namespace d9m::fill
