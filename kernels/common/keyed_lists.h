// What the device's keyed lists (keyed_lists_cuda.h) can hold and what they cost, in plain C++ so
// that the plans' checks and the memory estimates compile without CUDA (gather_test.cpp tests the
// crop_and_resize and scatter plans' limits, and crop_and_resize's figure, on the CPU).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace d9m::keyed_lists {

// Why a plan of `items` items (named `items_are`) over `keys` keys (`keys_are`) is past the
// lists' 32-bit positions and keys, one key kept for items listed nowhere; nullopt: it fits.
inline std::optional<std::string> unsupported(std::uint64_t items, std::uint64_t keys, const std::string& items_are,
                                              const std::string& keys_are) {
  if (items > 0x7fffffff) return "more than 2^31 - 1 " + items_are + ": the device gather's sort keeps 32-bit positions";
  if (keys >= 0xffffffff) return "2^32 - 1 or more " + keys_are + ": the device gather's sort keys are 32-bit";
  return std::nullopt;
}

// A bound on the device memory: keys and item numbers, their sorted copies, a start per key, and
// CUB's scratch (a copy of the pairs plus its decoupled look-back state, about 0.12 bytes an item
// on sm_90: 9 bytes an item and 1 MiB is a bound, not the exact figure).
inline std::uint64_t bytes(std::uint64_t items, std::uint64_t keys) { return 16 * items + 4 * (keys + 1) + 9 * items + (std::uint64_t{1} << 20); }

}  // namespace d9m::keyed_lists
