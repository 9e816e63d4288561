// Counter-based random bits with a fully specified output, so that every standard library,
// compiler and machine generates byte-identical inputs (std::*_distribution does not).
//
// bits(i) is the i-th output of SplitMix64 (Steele, Lea, Flood 2014) started from a key that
// is itself a SplitMix64 output of (seed, stream):
//   mix(z)  = z ^= z>>30; z *= 0xBF58476D1CE4E5B9; z ^= z>>27; z *= 0x94D049BB133111EB; z ^ z>>31
//   key     = mix(seed + G * (stream + 1)),   G = 0x9E3779B97F4A7C15
//   bits(i) = mix(key + G * (i + 1))
// Random access by counter lets any number of threads fill one tensor without changing it.
#pragma once
#include <cstdint>

namespace d9m {

class CounterRng {
 public:
  static constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

  static constexpr std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  constexpr CounterRng(std::uint64_t seed, std::uint64_t stream)
      : key_(mix(seed + kGolden * (stream + 1))) {}

  constexpr std::uint64_t bits(std::uint64_t i) const { return mix(key_ + kGolden * (i + 1)); }

  // A float on the grid k * 2^-23 in [-1, 1): exactly representable, no rounding anywhere.
  constexpr float unit_symmetric(std::uint64_t i) const {
    const auto k = static_cast<std::int32_t>(bits(i) >> 40) - (1 << 23);
    return static_cast<float>(k) * 0x1p-23f;
  }

  // An integer in [0, n) by Lemire's multiply-shift on the high 32 bits (n < 2^32).
  constexpr std::uint32_t below(std::uint64_t i, std::uint32_t n) const {
    return static_cast<std::uint32_t>(((bits(i) >> 32) * n) >> 32);
  }

 private:
  std::uint64_t key_;
};

}  // namespace d9m
