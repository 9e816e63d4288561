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

// Integers in [lo, hi).
inline void integers(FillTarget& t, std::int32_t lo, std::int32_t hi) {
  const CounterRng rng(t.seed, t.stream);
  auto* p = static_cast<std::int32_t*>(t.data);
  const auto n = static_cast<std::uint64_t>(t.desc.numel());
  const auto span = static_cast<std::uint32_t>(hi - lo);
  for (std::uint64_t i = 0; i < n; ++i) p[i] = lo + static_cast<std::int32_t>(rng.below(i, span));
}

}  // namespace d9m::fill
