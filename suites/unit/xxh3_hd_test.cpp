// The host/device XXH3 (what the GPU digest runs) against libxxhash, run here on the host: every
// length from 0 to 1100 (all code paths and their edges), the leaf size, and long inputs.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <vector>

#include "harness/core/xxh3_hd.h"
#include "kernels/common/counter_rng.h"

namespace d9m {
namespace {

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<unsigned char> b(n);
  const CounterRng rng(seed, 0);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(rng.bits(i));
  return b;
}

TEST(Xxh3HostDevice, MatchesLibxxhashOnEveryLengthAndPath) {
  const auto buf = random_bytes(70000, 11);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (std::size_t n : {2047u, 2048u, 4095u, 4096u, 4097u, 8192u, 65536u, 69999u}) lengths.push_back(n);
  for (std::size_t n : lengths) {
    ASSERT_EQ(xxh3::hash64(buf.data(), n), XXH3_64bits(buf.data(), n)) << "XXH3-64, length " << n;
    const auto mine = xxh3::hash128(buf.data(), n);
    const XXH128_hash_t ref = XXH3_128bits(buf.data(), n);
    ASSERT_EQ(mine.low, ref.low64) << "XXH3-128 low, length " << n;
    ASSERT_EQ(mine.high, ref.high64) << "XXH3-128 high, length " << n;
  }
}

// The device digest's layout (quarter stripes summed per block, then scrambled) is the same loop.
TEST(Xxh3HostDevice, QuarterStripeLayoutEqualsTheLongLoop) {
  const auto buf = random_bytes(70000, 12);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 241; n <= 3200; ++n) lengths.push_back(n);
  for (std::size_t n : {4095u, 4096u, 4097u, 5119u, 5120u, 5121u, 65536u, 69999u}) lengths.push_back(n);
  for (std::size_t n : lengths) {
    std::uint64_t want[8], got[8];
    xxh3::init_acc(want);
    xxh3::init_acc(got);
    xxh3::hash_long_loop(want, buf.data(), n);
    xxh3::hash_long_loop_by_quarters(got, buf.data(), n);
    for (int lane = 0; lane < 8; ++lane) ASSERT_EQ(got[lane], want[lane]) << "length " << n << ", lane " << lane;
  }
}

}  // namespace
}  // namespace d9m
