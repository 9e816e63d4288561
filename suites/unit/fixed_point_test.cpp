// The fixed-point sum of the *.fixed_point variants (kernels/common/fixed_point.h and
// accumulate.h fixed_point_sum): its conversions are exact or correctly rounded, its sum does not
// depend on the order of the adds or on the thread count, it is the exact sum rounded once, and
// infinities and NaNs come out as a float sum would give them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/fixed_point.h"
#include "kernels/common/thread_pool.h"

namespace d9m {
namespace {

using fixed_point::Wide;
// GCC's 128-bit integers, as exact references (__extension__: not ISO C++).
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

i128 as_int128(Wide w) { return static_cast<i128>((static_cast<u128>(w.hi) << 64) | w.lo); }
Wide from_int128(i128 v) {
  const auto u = static_cast<u128>(v);
  return Wide{static_cast<std::uint64_t>(u), static_cast<std::uint64_t>(u >> 64)};
}
std::uint64_t bits(double d) {
  std::uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

TEST(FixedPoint, WideIntegersRoundTo53BitsAsTheCompilerRoundsThem) {
  // GCC's i128 -> double conversion rounds to nearest, ties to even: the reference.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    u128 u = (static_cast<u128>(rng()) << 64) | rng();
    u >>= rng() % 128;  // every leading-bit position
    if (i % 3 == 0) u &= ~((static_cast<u128>(1) << (rng() % 80)) - 1);  // ties and exact values
    if (i % 5 == 0) u |= static_cast<u128>(1) << (rng() % 76);
    const i128 v = static_cast<i128>(u >> 1) * ((i & 1) ? -1 : 1);
    const int g = static_cast<int>(rng() % 200) - 100;
    const double want = std::ldexp(static_cast<double>(v), g);
    ASSERT_EQ(bits(fixed_point::to_double(from_int128(v), g)), bits(want)) << static_cast<double>(v) << " g=" << g;
  }
}

TEST(FixedPoint, ToFixedIsExactOnTheGridAndRoundsToNearestEvenOffIt) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int i = 0; i < 100000; ++i) {
    const double v = std::ldexp(unit(rng), static_cast<int>(rng() % 120) - 60);
    if (v == 0) continue;
    const int e = std::ilogb(v);
    // On the grid (2^g at or below v's last bit): back exactly.
    const int fine = e - 52 - static_cast<int>(rng() % 40);
    EXPECT_EQ(fixed_point::to_double(fixed_point::to_fixed(v, fine), fine), v);
    // Off it: the nearest multiple of 2^g.
    const int coarse = e - static_cast<int>(rng() % 30);
    const double want = std::ldexp(std::nearbyint(std::ldexp(v, -coarse)), coarse);
    EXPECT_EQ(fixed_point::to_double(fixed_point::to_fixed(v, coarse), coarse), want) << v;
  }
  EXPECT_EQ(as_int128(fixed_point::to_fixed(-0x1p95, 0)), -(static_cast<i128>(1) << 95));
  EXPECT_EQ(as_int128(fixed_point::to_fixed(2.5, 0)), 2);   // a tie, to even
  EXPECT_EQ(as_int128(fixed_point::to_fixed(-3.5, 0)), -4);
}

// Contributions to a few targets whose float sums depend on the order: large values that cancel,
// and small ones that a float sum loses beside them.
struct Racing {
  std::vector<float> values;
  std::vector<std::uint32_t> targets;
  template <class Emit>
  void operator()(std::size_t s, Emit& emit) const {
    emit(targets[s], values[s]);
  }
};

Racing racing(std::size_t n, std::size_t targets, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-1000, 1000);
  Racing r;
  for (std::size_t i = 0; i < n; ++i) {
    const float mantissa = 1.0f + static_cast<float>(rng() % 4096) / 4096.0f;
    const float big = (i % 7 == 0) ? std::ldexp(mantissa, 20 + static_cast<int>(rng() % 11)) * (rng() % 2 ? -1.0f : 1.0f) : 0.0f;
    r.values.push_back(big + std::ldexp(static_cast<float>(small(rng)), -12));
    r.targets.push_back(static_cast<std::uint32_t>(rng() % targets));
  }
  return r;
}

// The same contributions emitted as doubles (a double output).
struct AsDouble {
  const Racing* r;
  template <class Emit>
  void operator()(std::size_t s, Emit& emit) const {
    emit(r->targets[s], static_cast<double>(r->values[s]));
  }
};

std::vector<float> fixed_sum(const Racing& en, std::size_t targets, unsigned threads, const std::vector<float>& init) {
  ThreadPool pool(threads);
  std::vector<float> out = init;
  accumulate::fixed_point_sum(pool, en.values.size(), targets, out.data(), en, false);
  return out;
}

TEST(FixedPoint, TheSumIsTheExactSumRoundedOnceOnAnyThreadCountAndInAnyOrder) {
  const std::size_t targets = 5;
  const Racing en = racing(200000, targets, 3);
  std::vector<float> init(targets, 0.0f);
  init[1] = 0.75f;
  init[2] = -0.0f;
  // The exact sums: every value is a multiple of 2^-12 below 2^31, so an i128 of 2^-12 units holds them.
  std::vector<i128> exact(targets, 0);
  for (std::size_t i = 0; i < en.values.size(); ++i)
    exact[en.targets[i]] += static_cast<i128>(std::ldexp(static_cast<double>(en.values[i]), 12));
  const std::vector<float> one = fixed_sum(en, targets, 1, init);
  for (std::size_t t = 0; t < targets; ++t) {
    const float sum = static_cast<float>(std::ldexp(static_cast<double>(exact[t]), -12));
    EXPECT_EQ(one[t], init[t] + sum) << "target " << t;
  }
  // Threads race for the same five accumulators; the bits do not move.
  for (unsigned threads : {2u, 3u, 8u})
    for (int again = 0; again < 3; ++again)
      EXPECT_EQ(0, std::memcmp(fixed_sum(en, targets, threads, init).data(), one.data(), targets * sizeof(float))) << threads;
  // Nor when the contributions come in another order.
  Racing reversed = en;
  std::reverse(reversed.values.begin(), reversed.values.end());
  std::reverse(reversed.targets.begin(), reversed.targets.end());
  EXPECT_EQ(0, std::memcmp(fixed_sum(reversed, targets, 2, init).data(), one.data(), targets * sizeof(float)));
  // A float sum of the same contributions in two orders does differ (what the variant fixes).
  std::vector<float> forward(targets, 0.0f), backward(targets, 0.0f);
  for (std::size_t i = 0; i < en.values.size(); ++i) forward[en.targets[i]] += en.values[i];
  for (std::size_t i = en.values.size(); i-- > 0;) backward[en.targets[i]] += en.values[i];
  EXPECT_NE(0, std::memcmp(forward.data(), backward.data(), targets * sizeof(float)));
}

TEST(FixedPoint, InfinitiesAndNanComeOutAsAFloatSumGivesThemAndUntouchedTargetsKeepTheirBits) {
  const float inf = std::numeric_limits<float>::infinity();
  Racing en;
  en.values = {1.0f, inf, 2.0f, inf, -inf, 3.0f, 1e30f, -1e30f};
  en.targets = {0, 0, 1, 1, 1, 2, 3, 3};
  std::vector<float> init = {0.0f, 0.0f, 0.0f, 0.0f, -0.0f};
  const std::vector<float> out = fixed_sum(en, 5, 2, init);
  EXPECT_EQ(out[0], inf);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(out[3], 0.0f);  // exact cancellation, which a float sum in this order also gives
  EXPECT_TRUE(std::signbit(out[4]));  // no contribution: -0 stays -0
}

TEST(FixedPoint, ManyLargeContributionsToOneTargetDoNotOverflow) {
  // 2^20 contributions of the largest float each: the grid leaves room for the count.
  Racing en;
  en.values.assign(1 << 20, std::numeric_limits<float>::max() / 4);
  en.values.back() = 1.0f;  // far below the grid: lost, as in any float sum of these
  en.targets.assign(en.values.size(), 0);
  std::vector<float> init(1, 0.0f);
  const float got = fixed_sum(en, 1, 3, init)[0];
  EXPECT_EQ(got, std::numeric_limits<float>::infinity());  // the true sum is beyond float's range
  const double exact = static_cast<double>(std::numeric_limits<float>::max() / 4) * ((1 << 20) - 1);
  ThreadPool pool(2);
  std::vector<double> wide(1, 0.0);
  accumulate::fixed_point_sum(pool, en.values.size(), 1, wide.data(), AsDouble{&en}, false);
  EXPECT_EQ(wide[0], exact);
}

TEST(FixedPoint, TheWidenedFormIsTheSumRoundedOnceToTheOutputType) {
  // apply_widened's form at f16: float contributions, an f16 output that is the sum alone
  // (whatever it held before), rounded once from the exact sum.
  const std::size_t targets = 3;
  Racing en;  // small values only, so the f16 sums are finite and their last bit is rounded
  std::mt19937 rng(5);
  for (int i = 0; i < 50000; ++i) {
    en.values.push_back(std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), -12));
    en.targets.push_back(static_cast<std::uint32_t>(rng() % targets));
  }
  std::vector<i128> exact(targets, 0);
  for (std::size_t i = 0; i < en.values.size(); ++i)
    exact[en.targets[i]] += static_cast<i128>(std::ldexp(static_cast<double>(en.values[i]), 12));
  ThreadPool pool(3);
  std::vector<Half> out(targets, half_from_float(123.0f));
  accumulate::fixed_point_sum(pool, en.values.size(), targets, out.data(), en, true);
  for (std::size_t t = 0; t < targets; ++t) {
    const Half want = half_from_float(static_cast<float>(std::ldexp(static_cast<double>(exact[t]), -12)));
    EXPECT_TRUE(std::isfinite(to_float(want)));
    EXPECT_EQ(out[t].bits, want.bits) << "target " << t;
  }
}

}  // namespace
}  // namespace d9m
