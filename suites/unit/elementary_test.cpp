// The portable elementary functions (kernels/common/elementary.h): their accuracy against the C
// library's in long double, and the exact values the families rely on (e^0 = 1, ln 1 = 0).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/common/elementary.h"

namespace d9m {
namespace {

template <class A>
double ulps_from(A got, long double want) {
  const A rounded = static_cast<A>(want);
  const long double ulp = std::nextafter(rounded, std::numeric_limits<A>::infinity()) - rounded;
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

TEST(Elementary, ExpIsWithinTwoUlpsAndExactAtZero) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(0.0), 1.0);
  double worst_f = 0, worst_d = 0;
  for (int i = 0; i <= 200000; ++i) {
    const double x = -87.0 * i / 200000.0;  // f32's normal range
    const auto xf = static_cast<float>(x);
    worst_f = std::max(worst_f, ulps_from(exp_nonpositive(xf), std::exp(static_cast<long double>(xf))));
    worst_d = std::max(worst_d, ulps_from(exp_nonpositive(x * 8), std::exp(static_cast<long double>(x * 8))));  // to -696
  }
  EXPECT_LE(worst_f, 2.0);
  EXPECT_LE(worst_d, 2.0);
  // Below the normal range the result is 0, on the host and the device alike.
  EXPECT_EQ(exp_nonpositive(-100.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-800.0), 0.0);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

// Over [2^-20, 2^40] (the softmax denominators lie in [1, classes]) and around 1, where ln x is
// small and a relative error would show first: within 1 ulp of the result (0.81 measured).
TEST(Elementary, LogIsWithinOneUlpAndExactAtOne) {
  EXPECT_EQ(log_positive(1.0f), 0.0f);
  EXPECT_EQ(log_positive(1.0), 0.0);
  EXPECT_EQ(log_positive(2.0f), static_cast<float>(std::log(2.0L)));
  double worst_f = 0, worst_d = 0;
  for (int i = 0; i <= 200000; ++i) {
    const double x = std::exp2(-20.0 + 60.0 * i / 200000.0);
    const auto xf = static_cast<float>(x);
    worst_f = std::max(worst_f, ulps_from(log_positive(xf), std::log(static_cast<long double>(xf))));
    worst_d = std::max(worst_d, ulps_from(log_positive(x), std::log(static_cast<long double>(x))));
  }
  for (int k = 1; k <= 4096; ++k) {  // the floats and doubles next to 1 on both sides
    const float up = 1.0f + static_cast<float>(k) * std::numeric_limits<float>::epsilon();
    const float down = 1.0f - static_cast<float>(k) * std::numeric_limits<float>::epsilon() / 2;
    for (float xf : {up, down}) worst_f = std::max(worst_f, ulps_from(log_positive(xf), std::log(static_cast<long double>(xf))));
    const double upd = 1.0 + k * std::numeric_limits<double>::epsilon();
    const double downd = 1.0 - k * std::numeric_limits<double>::epsilon() / 2;
    for (double xd : {upd, downd}) worst_d = std::max(worst_d, ulps_from(log_positive(xd), std::log(static_cast<long double>(xd))));
  }
  EXPECT_LE(worst_f, 1.0);
  EXPECT_LE(worst_d, 1.0);
}

// |got - log x| in units of the last place of log x (long double's log as the truth).
template <class A>
double ulps_from_log(A x) {
  const long double want = std::log(static_cast<long double>(x));
  const A w = static_cast<A>(want);
  const long double ulp = std::nextafter(std::fabs(w), std::numeric_limits<A>::infinity()) - std::fabs(w);
  return static_cast<double>(std::fabs(static_cast<long double>(log_positive(x)) - want) / ulp);
}

// Over both normal ranges, densely over [1, 4] (where the CTC recursions take their logs), at 0
// and on subnormals.
TEST(Elementary, LogIsWithinOneUlpAcrossTheRangeAtZeroAndOnSubnormals) {
  EXPECT_EQ(log_positive(1.0f), 0.0f);
  EXPECT_EQ(log_positive(1.0), 0.0);
  EXPECT_EQ(log_positive(0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(log_positive(0.0), -std::numeric_limits<double>::infinity());
  double worst_f = 0, worst_d = 0;
  for (int i = 0; i <= 400000; ++i) {
    // Over the normal ranges, and densely over [1, 4] where the recursions take their logs.
    const double wide = std::exp(-87.0 + 174.0 * i / 400000.0), dense = 1.0 + 3.0 * i / 400000.0;
    worst_f = std::max({worst_f, ulps_from_log(static_cast<float>(wide)), ulps_from_log(static_cast<float>(dense))});
    worst_d = std::max({worst_d, ulps_from_log(std::exp(-700.0 + 1400.0 * i / 400000.0)), ulps_from_log(dense * (1 + 0x1p-40))});
  }
  EXPECT_LE(worst_f, 1.0);
  EXPECT_LE(worst_d, 1.0);
  // Subnormal inputs are scaled into range first.
  EXPECT_LE(ulps_from_log(std::numeric_limits<float>::denorm_min() * 3), 1.0);
  EXPECT_LE(ulps_from_log(std::numeric_limits<double>::denorm_min() * 3), 1.0);
}

TEST(Elementary, ExpHoldsAboveZeroUpToHalfLn2) {
  // Occupancy logarithms are <= 0 but for rounding: exp_nonpositive must hold a little above 0.
  double worst_f = 0, worst_d = 0;
  for (int i = 0; i <= 100000; ++i) {
    const double x = 0.34657359027997264 * i / 100000.0;
    for (int side : {0, 1}) {
      const long double want = std::exp(static_cast<long double>(side ? static_cast<float>(x) : x));
      if (side) {
        const float w = static_cast<float>(want);
        const long double ulp = std::nextafter(w, std::numeric_limits<float>::infinity()) - w;
        worst_f = std::max(worst_f, static_cast<double>(std::fabs(exp_nonpositive(static_cast<float>(x)) - want) / ulp));
      } else {
        const double w = static_cast<double>(want);
        const long double ulp = std::nextafter(w, std::numeric_limits<double>::infinity()) - w;
        worst_d = std::max(worst_d, static_cast<double>(std::fabs(exp_nonpositive(x) - want) / ulp));
      }
    }
  }
  EXPECT_LE(worst_f, 2.0);
  EXPECT_LE(worst_d, 2.0);
}

}  // namespace
}  // namespace d9m
