// Elementary functions written from + - * / and bit manipulation only, in float or double, so the
// host and the device run the same operations with the same roundings (IEEE add, subtract,
// multiply and divide are correctly rounded on both; the build turns contraction off on both,
// -ffp-contract=off and --fmad=false; nvcc's default -prec-div=true keeps float division
// correctly rounded). The C library's expf/logf and CUDA's differ in their last bits, so a
// kernel that used them could claim only its own determinism, not another implementation's bits.
//
//   exp_nonpositive(x)  e^x for x <= 0 (softmax after subtracting the row maximum)
//   log_positive(x)     ln x for a positive normal x (the log of a softmax denominator, >= 1)
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/hd.h"

namespace d9m {

// e^x for x <= 0, from + - * and an exponent built from bits: a Cody-Waite reduction
// x = n ln2 + r, |r| <= ln2/2, then Taylor's series to degree 7 (f32: truncation < 1e-8 relative)
// or 13 (f64: < 1e-17), then the product with 2^n. Results below the normal range are 0.
template <class A>
D9M_HD inline A exp_nonpositive(A x) {
  static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>);
  constexpr bool wide = std::is_same_v<A, double>;
  constexpr int kMinExponent = wide ? -1022 : -126;
  // ln2 = hi + lo, hi with trailing zero bits so n * hi is exact for the n that reach here.
  const A ln2_hi = wide ? A(6.93147180369123816490e-01) : A(0.693145751953125);
  const A ln2_lo = wide ? A(1.90821492927058770002e-10) : A(1.428606765330187045e-06);
  const A log2e = A(1.4426950408889634);
  // Round x log2e to the nearest integer (ties away from zero): it is <= 0, so truncate y - 0.5.
  const A y = x * log2e - A(0.5);
  if (!(y > A(kMinExponent - 1))) return A(0);  // below the normal range (or NaN: not reached)
  const auto n = static_cast<int>(y);
  const A fn = static_cast<A>(n);
  const A r = (x - fn * ln2_hi) - fn * ln2_lo;
  A p;
  if constexpr (wide) {
    p = A(1.0 / 6227020800.0);  // 1/13!
    const A c[] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0,
                   1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,       1.0 / 6.0,      0.5,           1.0,
                   1.0};
    for (A ck : c) p = p * r + ck;
  } else {
    p = A(1.0 / 5040.0);  // 1/7!
    const A c[] = {A(1.0 / 720.0), A(1.0 / 120.0), A(1.0 / 24.0), A(1.0 / 6.0), A(0.5), A(1.0), A(1.0)};
    for (A ck : c) p = p * r + ck;
  }
  // 2^n, a normal number: its exponent field alone.
  A two_n;
  if constexpr (wide) {
    const std::uint64_t bits = static_cast<std::uint64_t>(n + 1023) << 52;
    std::memcpy(&two_n, &bits, sizeof two_n);
  } else {
    const std::uint32_t bits = static_cast<std::uint32_t>(n + 127) << 23;
    std::memcpy(&two_n, &bits, sizeof two_n);
  }
  return p * two_n;
}

// ln x for a positive normal x (zero, subnormals, infinities and NaN are not reached: the callers
// take the log of a sum of exponentials that includes e^0 = 1), in fdlibm's e_log.c arrangement:
// x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) from the bits (exact, f = m - 1 exact too);
// s = f / (2 + f), z = s^2 <= 0.0295; ln(1 + f) = f - (hfsq - s (hfsq + R)) with hfsq = f^2 / 2
// and R = 2z/3 + 2z^2/5 + ..., Taylor's series to z^4 in f32 (truncation < 2e-9 of the result)
// and z^10 in f64 (< 1e-18); then ln x = e ln2_hi - ((hfsq - (s (hfsq + R) + e ln2_lo)) - f),
// e ln2_hi exact (ln2_hi has 15 significant bits in f32, 32 in f64, and |e| < 2^11). Within 1
// ulp (0.81 measured over [2^-20, 2^40], suites/unit/elementary_test.cpp); ln 1 is exactly 0.
template <class A>
D9M_HD inline A log_positive(A x) {
  static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>);
  constexpr bool wide = std::is_same_v<A, double>;
  const A ln2_hi = wide ? A(6.93147180369123816490e-01) : A(0.693145751953125);
  const A ln2_lo = wide ? A(1.90821492927058770002e-10) : A(1.428606765330187045e-06);
  int e;
  A m;
  if constexpr (wide) {
    std::uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    e = static_cast<int>((bits >> 52) & 0x7ffu) - 1023;
    bits = (bits & 0x000fffffffffffffull) | (std::uint64_t{1023} << 52);  // m in [1, 2)
    std::memcpy(&m, &bits, sizeof m);
  } else {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    e = static_cast<int>((bits >> 23) & 0xffu) - 127;
    bits = (bits & 0x007fffffu) | (127u << 23);
    std::memcpy(&m, &bits, sizeof m);
  }
  if (m > A(1.4142135623730950488)) {  // into [sqrt(1/2), sqrt(2)]: halving is exact
    m = m * A(0.5);
    ++e;
  }
  const A f = m - A(1);  // exact (Sterbenz)
  const A s = f / (A(2) + f);
  const A z = s * s;
  A r;
  if constexpr (wide) {
    r = A(2.0 / 21.0);
    const A c[] = {2.0 / 19.0, 2.0 / 17.0, 2.0 / 15.0, 2.0 / 13.0, 2.0 / 11.0, 2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0};
    for (A ck : c) r = r * z + ck;
  } else {
    r = A(2.0 / 9.0);
    const A c[] = {A(2.0 / 7.0), A(2.0 / 5.0), A(2.0 / 3.0)};
    for (A ck : c) r = r * z + ck;
  }
  r = r * z;
  const A hfsq = A(0.5) * f * f;
  const A fe = static_cast<A>(e);
  return fe * ln2_hi - ((hfsq - (s * (hfsq + r) + fe * ln2_lo)) - f);
}

}  // namespace d9m
