// The 16-bit float types of the precision axis, as storage: IEEE binary16 (`Half`, CUDA's __half)
// and bfloat16 (`BFloat16`, CUDA's __nv_bfloat16), with conversions specified bit for bit so
// that inputs, the CPU variants and the CUDA variants agree on every machine:
//
//   to_float    exact (every f16 and bf16 value is a float).
//   from_float  round to nearest, ties to even (IEEE 754 roundTiesToEven), with overflow to
//               infinity and gradual underflow (f16 subnormals down to 2^-24; bf16 keeps float's
//               exponent range, so its subnormals are float's). A NaN becomes the canonical
//               quiet NaN of the type with the input's sign (0x7e00 / 0x7fc0): payloads are not
//               carried, because hardware converters disagree on them.
//   add         a + b rounded once to the type. Done as a float add and a from_float: for one
//               addition that double rounding is exact (float's 24 bits are at least 2p+2 for
//               f16's p = 11 and bf16's p = 8), so it equals the hardware's correctly rounded
//               half add (and the CUDA atomicAdd on __half / __nv_bfloat16) bit for bit.
//
// These are plain host/device functions on the bits, not the compilers' _Float16 or CUDA's
// intrinsics, so the host and the device run literally the same code (hd.h).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/hd.h"

namespace d9m {

struct Half {
  std::uint16_t bits = 0;
};
struct BFloat16 {
  std::uint16_t bits = 0;
};

namespace half_detail {

D9M_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
D9M_HD inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace half_detail

D9M_HD inline float to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1fu;
  std::uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return half_detail::bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp != 0) return half_detail::bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return half_detail::bits_float(sign);
  // Subnormal: mant * 2^-24, normalised into a float.
  std::uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return half_detail::bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

D9M_HD inline float to_float(BFloat16 b) { return half_detail::bits_float(static_cast<std::uint32_t>(b.bits) << 16); }
// Every storage type as a float, as TensorFlow's kernels read a T input with static_cast<float>:
// exact but for double, which rounds to nearest.
D9M_HD inline float to_float(float f) { return f; }
D9M_HD inline float to_float(double d) { return static_cast<float>(d); }

// Rounds `value` (an unsigned integer carrying `shift` bits below the target's last bit) to
// nearest, ties to even.
D9M_HD inline std::uint32_t round_shift_even(std::uint32_t value, unsigned shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rem = value & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
}

D9M_HD inline Half half_from_float(float f) {
  const std::uint32_t x = half_detail::float_bits(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
  if (ax >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520: inf (ties to even)
  if (ax >= 0x38800000u)  // normal: rebias the exponent, round the 13 dropped bits (a carry may bump it)
    return {static_cast<std::uint16_t>(sign | round_shift_even(ax - 0x38000000u, 13))};
  if (ax <= 0x33000000u) return {sign};  // <= 2^-25: zero (2^-25 itself ties to the even zero)
  // Subnormal: the 24-bit significand shifted so its unit is 2^-24 (14 to 24 places).
  const std::uint32_t exp = ax >> 23;
  const std::uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  return {static_cast<std::uint16_t>(sign | round_shift_even(mant, 126 - exp))};
}

D9M_HD inline BFloat16 bfloat16_from_float(float f) {
  const std::uint32_t x = half_detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u)};
  // Exponent and significand round together: a carry out of the significand bumps the exponent,
  // and out of the largest finite value gives infinity, as IEEE rounding does.
  return {static_cast<std::uint16_t>(round_shift_even(x, 16))};
}

// Conversions and the one rounding add, by type, for code templated on the storage type T
// (float, double, Half, BFloat16). Float and double round as the hardware does.
template <class T> D9M_HD inline T from_float(float f);
template <> D9M_HD inline float from_float<float>(float f) { return f; }
template <> D9M_HD inline double from_float<double>(float f) { return f; }
template <> D9M_HD inline Half from_float<Half>(float f) { return half_from_float(f); }
template <> D9M_HD inline BFloat16 from_float<BFloat16>(float f) { return bfloat16_from_float(f); }

D9M_HD inline float add(float a, float b) { return a + b; }
D9M_HD inline double add(double a, double b) { return a + b; }
D9M_HD inline Half add(Half a, Half b) { return half_from_float(to_float(a) + to_float(b)); }
D9M_HD inline BFloat16 add(BFloat16 a, BFloat16 b) { return bfloat16_from_float(to_float(a) + to_float(b)); }
// Integer counters (histograms) add exactly.
D9M_HD inline std::int32_t add(std::int32_t a, std::int32_t b) { return a + b; }

// The one rounding multiply: the float product of two 16-bit values is exact (11 + 11 and 8 + 8
// significand bits), so rounding it once is the correctly rounded product (as __hmul).
D9M_HD inline float mul(float a, float b) { return a * b; }
D9M_HD inline double mul(double a, double b) { return a * b; }
D9M_HD inline Half mul(Half a, Half b) { return half_from_float(to_float(a) * to_float(b)); }
D9M_HD inline BFloat16 mul(BFloat16 a, BFloat16 b) { return bfloat16_from_float(to_float(a) * to_float(b)); }

// The one rounding subtraction (Eigen's and c10's 16-bit minus: in float, then rounded).
D9M_HD inline float sub(float a, float b) { return a - b; }
D9M_HD inline double sub(double a, double b) { return a - b; }
D9M_HD inline Half sub(Half a, Half b) { return half_from_float(to_float(a) - to_float(b)); }
D9M_HD inline BFloat16 sub(BFloat16 a, BFloat16 b) { return bfloat16_from_float(to_float(a) - to_float(b)); }

// The one rounding division (c10's 16-bit operator/: in float, then rounded). Rounding the float
// quotient again is the correctly rounded quotient, as for add: float's 24 bits are at least
// 2p + 2 for f16's p = 11 and bf16's p = 8 (Figueroa's condition holds for division too).
D9M_HD inline float div(float a, float b) { return a / b; }
D9M_HD inline double div(double a, double b) { return a / b; }
D9M_HD inline Half div(Half a, Half b) { return half_from_float(to_float(a) / to_float(b)); }
D9M_HD inline BFloat16 div(BFloat16 a, BFloat16 b) { return bfloat16_from_float(to_float(a) / to_float(b)); }

// The accumulation type of storage type T, as cuBLAS's and cuSPARSE's CUDA_R_32F compute: f32 for
// f32, f16 and bf16, f64 for f64. widen() into it is exact; narrow() out of it rounds once.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
D9M_HD inline Acc<T> widen(T v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return v;
  else return to_float(v);
}

template <class T>
D9M_HD inline T narrow(Acc<T> v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return v;
  else return from_float<T>(v);
}

// The lowest finite value of T (Eigen's NumTraits<T>::lowest(), which TensorFlow's max kernels
// start from).
template <class T>
D9M_HD inline T lowest_finite() {
  if constexpr (std::is_same_v<T, float>) return -3.40282347e38f;
  else if constexpr (std::is_same_v<T, double>) return -1.7976931348623157e308;
  else if constexpr (std::is_same_v<T, Half>) return Half{0xFBFFu};  // -65504
  else return BFloat16{0xFF7Fu};                                     // -(2 - 2^-7) * 2^127
}

}  // namespace d9m
