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

}  // namespace
}  // namespace d9m
