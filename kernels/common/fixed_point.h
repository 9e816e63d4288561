// Fixed-point accumulation: the arithmetic of the *.fixed_point variants of ops in scatter form
// (accumulate.h, accumulate_cuda.cuh), shared by the CPU and the device so both give the same bits.
//
// Every contribution v is rounded once onto the grid 2^g and added as a signed 128-bit integer.
// Integer addition is associative, so the sum, and the output rounded from it, does not depend on
// the order of the adds: threads or GPU atomics may race, the bits stay the same, on any thread
// count and on any GPU. The grid is fixed before any add by two order-free facts of the whole op,
// the largest exponent among the finite contributions and how many there are:
//   g = e_max + 1 + bits(total) - 126
// so that no sum can reach 2^126 (no overflow), and the largest contribution keeps at least 62
// bits, more than a double's 53: a contribution 2^k below the largest loses only what falls below
// the grid. Non-finite contributions (inf, nan) are summed apart in double; any sum of them alone
// is order-free too (inf + -inf is nan whichever comes first), and it is the target's value, as a
// sum in float would be.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::fixed_point {

// Two's complement, 128 bits: hi:lo.
struct Wide {
  std::uint64_t lo = 0, hi = 0;
};

// No finite nonzero contribution seen: the grid does not matter.
inline constexpr int kNoExponent = -100000;

D9M_HD inline int clz64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return x == 0 ? 64 : __builtin_clzll(x);
#endif
}

D9M_HD inline double as_double(float v) { return v; }
D9M_HD inline double as_double(double v) { return v; }
D9M_HD inline double as_double(Half v) { return to_float(v); }
D9M_HD inline double as_double(BFloat16 v) { return to_float(v); }

// floor(log2 |v|) of a finite nonzero v; kNoExponent for zero and non-finite values.
D9M_HD inline int exponent_of(double v) {
  if (v == 0 || !std::isfinite(v)) return kNoExponent;
  return std::ilogb(v);
}

D9M_HD inline int grid_exponent(int e_max, std::uint64_t total) {
  if (e_max == kNoExponent) return 0;
  const int count_bits = 64 - clz64(total);
  return e_max + 1 + count_bits - 126;
}

D9M_HD inline Wide negate(Wide w) {
  Wide r;
  r.lo = ~w.lo + 1;
  r.hi = ~w.hi + (r.lo == 0 ? 1 : 0);
  return r;
}

// v (finite) rounded to the nearest multiple of 2^g (ties to even), in units of 2^g. Exact steps:
// |v| / 2^g < 2^(126 - bits(total)) <= 2^125 by the choice of g, rint leaves an integer of at
// most 53 significant bits, and its split at 2^64 is exact.
D9M_HD inline Wide to_fixed(double v, int g) {
  const double r = std::rint(std::ldexp(v, -g));
  const double m = std::fabs(r);
  Wide w;
  w.hi = static_cast<std::uint64_t>(m * 0x1p-64);
  w.lo = static_cast<std::uint64_t>(m - static_cast<double>(w.hi) * 0x1p64);
  return r < 0 ? negate(w) : w;
}

D9M_HD inline bool is_zero(Wide w) { return w.lo == 0 && w.hi == 0; }

// The value of w * 2^g as a double, rounded to nearest, ties to even (one rounding, done on the
// integer, so the host and the device agree by construction).
D9M_HD inline double to_double(Wide w, int g) {
  const bool negative = (w.hi >> 63) != 0;
  if (negative) w = negate(w);
  if (is_zero(w)) return 0.0;
  const int top = w.hi ? 127 - clz64(w.hi) : 63 - clz64(w.lo);  // position of the leading 1
  if (top <= 52) {
    const double exact = std::ldexp(static_cast<double>(w.lo), g);
    return negative ? -exact : exact;
  }
  const int shift = top - 52;  // 1..75: keep 53 bits
  std::uint64_t kept, round_bit, sticky;
  if (shift < 64) {
    kept = (w.lo >> shift) | (shift ? w.hi << (64 - shift) : 0);
    round_bit = (w.lo >> (shift - 1)) & 1;
    sticky = shift > 1 ? (w.lo & ((std::uint64_t{1} << (shift - 1)) - 1)) : 0;
  } else {
    const int s = shift - 64;  // 0..11
    kept = w.hi >> s;
    round_bit = s ? (w.hi >> (s - 1)) & 1 : w.lo >> 63;
    sticky = s ? ((w.hi & ((std::uint64_t{1} << (s - 1)) - 1)) | w.lo) : (w.lo << 1);
  }
  if (round_bit && (sticky || (kept & 1))) ++kept;  // may reach 2^53: still exact in a double
  const double value = std::ldexp(static_cast<double>(kept), shift + g);
  return negative ? -value : value;
}

// The output type's value of a sum held as a double: one rounding more (to float, then to f16 or
// bf16 through float, as half.h rounds everywhere).
template <class T>
D9M_HD inline T from_double(double d);
template <>
D9M_HD inline float from_double<float>(double d) { return static_cast<float>(d); }
template <>
D9M_HD inline double from_double<double>(double d) { return d; }
template <>
D9M_HD inline Half from_double<Half>(double d) { return half_from_float(static_cast<float>(d)); }
template <>
D9M_HD inline BFloat16 from_double<BFloat16>(double d) { return bfloat16_from_float(static_cast<float>(d)); }

// A target's result: `init` (what the output held) plus the sum, or the sum alone when `replace`
// (the widened form, whose output is the rounded sum). A target no finite contribution moved and
// no special one reached keeps init bit for bit (-0 stays -0).
template <class T>
D9M_HD inline T finish(T init, Wide acc, double special, int g, bool replace) {
  if (special != 0) return replace ? from_double<T>(special) : add(init, from_double<T>(special));
  if (is_zero(acc)) return replace ? from_double<T>(0.0) : init;
  const T sum = from_double<T>(to_double(acc, g));
  return replace ? sum : add(init, sum);
}

}  // namespace d9m::fixed_point
