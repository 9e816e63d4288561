// How two outputs differ at one element, for the diff stats of a trial that did not reproduce
// the first: the absolute difference (as double; infinite when either side is NaN) and the
// distance in units in the last place of the element's type. Host and device run this same code
// (the CPU executor and the GPU digester), so their stats agree.
//
// ULP distance: each value's bits read as sign and magnitude; on the same side of zero it is the
// difference of the magnitudes, across zero their sum (so +0 and -0 are 0 apart, and the
// distance is the number of representable values between the two). Integers differ by their
// difference.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/tensor.h"

namespace d9m {

struct ElementDiff {
  double abs_diff = 0;
  std::uint64_t ulp = 0;
};

namespace element_diff_detail {

D9M_HD inline std::uint64_t ulp_distance(std::uint64_t a, std::uint64_t b, int bits) {
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  const std::uint64_t ma = a & (sign - 1), mb = b & (sign - 1);
  if ((a & sign) == (b & sign)) return ma > mb ? ma - mb : mb - ma;
  return ma + mb;
}

template <class Bits>
D9M_HD inline Bits load_bits(const void* p, std::int64_t i) {
  Bits b;
  std::memcpy(&b, static_cast<const unsigned char*>(p) + i * static_cast<std::int64_t>(sizeof(Bits)), sizeof b);
  return b;
}

D9M_HD inline bool is_nan(double x) { return x != x; }

}  // namespace element_diff_detail

// False when the elements are bit-identical; otherwise true with `out` set.
D9M_HD inline bool diff_element(DType dtype, const void* a, const void* b, std::int64_t i, ElementDiff& out) {
  using namespace element_diff_detail;
  double x = 0, y = 0;
  std::uint64_t xb = 0, yb = 0;
  int bits = 32;
  switch (dtype) {
    case DType::i32: {
      const auto p = load_bits<std::int32_t>(a, i), q = load_bits<std::int32_t>(b, i);
      if (p == q) return false;
      const std::int64_t d = static_cast<std::int64_t>(p) - q;
      out.abs_diff = static_cast<double>(d < 0 ? -d : d);
      out.ulp = static_cast<std::uint64_t>(d < 0 ? -d : d);
      return true;
    }
    case DType::f32: {
      xb = load_bits<std::uint32_t>(a, i), yb = load_bits<std::uint32_t>(b, i);
      float fx, fy;
      std::memcpy(&fx, &xb, 4), std::memcpy(&fy, &yb, 4);
      x = fx, y = fy;
      break;
    }
    case DType::f64: {
      xb = load_bits<std::uint64_t>(a, i), yb = load_bits<std::uint64_t>(b, i);
      std::memcpy(&x, &xb, 8), std::memcpy(&y, &yb, 8);
      bits = 64;
      break;
    }
    case DType::f16:
    case DType::bf16: {
      const auto p = load_bits<std::uint16_t>(a, i), q = load_bits<std::uint16_t>(b, i);
      xb = p, yb = q;
      x = dtype == DType::f16 ? to_float(Half{p}) : to_float(BFloat16{p});
      y = dtype == DType::f16 ? to_float(Half{q}) : to_float(BFloat16{q});
      bits = 16;
      break;
    }
  }
  if (xb == yb) return false;
  if (is_nan(x) || is_nan(y)) {
    const std::uint64_t inf = 0x7ff0000000000000ull;
    std::memcpy(&out.abs_diff, &inf, sizeof inf);
  } else {
    out.abs_diff = x > y ? x - y : y - x;
  }
  out.ulp = ulp_distance(xb, yb, bits);
  return true;
}

}  // namespace d9m
