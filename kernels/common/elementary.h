// Elementary functions written from + - * / and bit manipulation only, in float or double, so the
// host and the device run the same operations with the same roundings (IEEE add, subtract,
// multiply and divide are correctly rounded on both; the build turns contraction off on both,
// -ffp-contract=off and --fmad=false; nvcc's default -prec-div=true keeps float division
// correctly rounded). The C library's expf/logf and CUDA's differ in their last bits, so a
// kernel that used them could claim only its own determinism, not another implementation's bits.
//
//   exp_nonpositive(x)  e^x for x <= 0 (softmax after subtracting the row maximum)
//   log_positive(x)     ln x for x >= 0 (the log of a softmax denominator or of a CTC occupancy sum)
//   negative_infinity() -inf of float or double, from its bits
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/hd.h"

namespace d9m {

// -infinity of A (float or double), from its bits.
template <class A>
D9M_HD inline A negative_infinity() {
  static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>);
  A v;
  if constexpr (std::is_same_v<A, double>) {
    const std::uint64_t bits = 0xfff0000000000000ull;
    std::memcpy(&v, &bits, sizeof v);
  } else {
    const std::uint32_t bits = 0xff800000u;
    std::memcpy(&v, &bits, sizeof v);
  }
  return v;
}

// e^x for x <= 0, from + - * and an exponent built from bits: a Cody-Waite reduction
// x = n ln2 + r, |r| <= ln2/2, then Taylor's series to degree 7 (f32: truncation < 1e-8 relative)
// or 13 (f64: < 1e-17), then the product with 2^n. Results below the normal range are 0, and
// -inf gives 0. The same holds for 0 < x <= ln2/2 (there n = 0 and r = x): the CTC family's
// occupancy logarithms are <= 0 but for rounding, which may leave them a few units above.
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

// log(x) for x >= 0 finite (log 0 = -inf; subnormal x is scaled into the normal range first),
// fdlibm's reduction written afresh: x = 2^k m with m in [sqrt(1/2), sqrt(2)) taken from the
// bits, u = m - 1 (exact: Sterbenz), s = u / (2 + u), so that log(1 + u) = 2 atanh(s) = 2s + s R
// with R = z (2/3 + 2/5 z + 2/7 z^2 + ...), z = s^2 <= 0.0295; the series stops at 2/11 z^4 for f32
// (truncation < 3e-9 relative) and 2/21 z^9 for f64 (< 3e-17). Written as fdlibm does,
// log(1 + u) = u - (u^2/2 - s (u^2/2 + R)), whose leading term u is exact, and
// log x = k ln2_hi + (log(1 + u) + k ln2_lo) with k ln2_hi exact. Within 1 ulp of the true
// logarithm on the tested ranges (0.83 measured, suites/unit/elementary_test.cpp). Negative x,
// NaN and +inf are never passed (the callers take logs of sums of exponentials: a softmax
// denominator is at least 1, a CTC occupancy sum 0 or positive).
template <class A>
D9M_HD inline A log_positive(A x) {
  static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>);
  constexpr bool wide = std::is_same_v<A, double>;
  using Bits = std::conditional_t<wide, std::uint64_t, std::uint32_t>;
  constexpr int kMantissa = wide ? 52 : 23;
  constexpr int kBias = wide ? 1023 : 127;
  constexpr Bits kMantissaMask = (Bits{1} << kMantissa) - 1;
  if (x == A(0)) return negative_infinity<A>();
  int k = 0;
  Bits bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits >> kMantissa) == 0) {  // subnormal: times 2^(kMantissa + 2), exactly
    x = x * (wide ? A(0x1p54) : A(0x1p25f));
    k = -(kMantissa + 2);
    std::memcpy(&bits, &x, sizeof bits);
  }
  k += static_cast<int>(bits >> kMantissa) - kBias;
  const Bits m_bits = (bits & kMantissaMask) | (static_cast<Bits>(kBias) << kMantissa);
  A m;
  std::memcpy(&m, &m_bits, sizeof m);  // in [1, 2)
  if (m > A(1.4142135623730951)) {
    m = m * A(0.5);  // exact
    ++k;
  }
  const A ln2_hi = wide ? A(6.93147180369123816490e-01) : A(0.693145751953125);
  const A ln2_lo = wide ? A(1.90821492927058770002e-10) : A(1.428606765330187045e-06);
  const A u = m - A(1);
  const A s = u / (A(2) + u);
  const A z = s * s;
  A p;
  if constexpr (wide) {
    p = A(2.0 / 21.0);
    const A c[] = {2.0 / 19.0, 2.0 / 17.0, 2.0 / 15.0, 2.0 / 13.0, 2.0 / 11.0, 2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0};
    for (A ck : c) p = p * z + ck;
  } else {
    p = A(2.0 / 11.0);
    const A c[] = {A(2.0 / 9.0), A(2.0 / 7.0), A(2.0 / 5.0), A(2.0 / 3.0)};
    for (A ck : c) p = p * z + ck;
  }
  const A r = z * p;
  const A half_u2 = A(0.5) * u * u;
  const A fk = static_cast<A>(k);
  return fk * ln2_hi + (u - (half_u2 - (s * (half_u2 + r) + fk * ln2_lo)));
}

}  // namespace d9m
