// Input fillers shared by the op families, all on CounterRng so inputs are byte-identical on
// every machine. Each input has its own generator stream (its argument index).
#pragma once
#include <cstdint>

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

}  // namespace d9m::fill
