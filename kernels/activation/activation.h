// activation family, TensorFlow semantics (relu_op_functor.h), elementwise on a tensor of any
// shape (a flat [n] or an NHWC [n, h, w, c] conv output):
//   relu(features)                -> output = max(features, 0)
//   relu_grad(gradients, features) -> output = gradients where features > 0, else gradients * 0
// NaN: TF's Relu is cwiseMax<Eigen::PropagateNaN>(0) on the CPU and the GPU, so a NaN feature
// comes out NaN; d9m passes its bits through unchanged (no arithmetic touches it). -0 and +0 give
// +0 (max(-0, 0): Eigen's scalar std::max would keep -0, CUDA's fmaxf either; d9m fixes +0).
// ReluGrad is TF's product gradients * T(features > 0), features NaN counting as not > 0: where
// the mask is 0 the product is +0 or -0 with the gradient's sign, and NaN for an infinite or NaN
// gradient. That NaN is written as the type's canonical quiet NaN, because the hardware's differ
// (x86 gives a negative "indefinite", NVIDIA GPUs 0x7fffffff); a gradient passed where the mask
// is 1 keeps its bits. No rounding anywhere: every variant, at every dtype, gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/registry.h"

namespace d9m::activation {

struct Geometry {
  std::int64_t elements = 0;
};

// The canonical quiet NaN of T with a clear sign bit (half.h's for the 16-bit types).
template <class T>
D9M_HD inline T quiet_nan() {
  if constexpr (std::is_same_v<T, float>) {
    const std::uint32_t bits = 0x7fc00000u;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  } else if constexpr (std::is_same_v<T, double>) {
    const std::uint64_t bits = 0x7ff8000000000000ull;
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  } else if constexpr (std::is_same_v<T, Half>) {
    return Half{0x7e00u};
  } else {
    return BFloat16{0x7fc0u};
  }
}

// The sign bit of a float or double (widen() keeps the sign of a zero).
template <class A>
D9M_HD inline bool sign_bit(A v) {
  if constexpr (std::is_same_v<A, double>) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return (bits >> 63) != 0;
  } else {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return (bits >> 31) != 0;
  }
}

template <class T>
D9M_HD inline T relu(T x) {
  const Acc<T> w = widen(x);
  return (w > Acc<T>(0) || w != w) ? x : T{};  // T{}: +0, all bits zero in every float type
}

template <class T>
D9M_HD inline T relu_grad(T gradient, T feature) {
  if (widen(feature) > Acc<T>(0)) return gradient;
  const Acc<T> g = widen(gradient);
  if (g != g || g - g != g - g) return quiet_nan<T>();  // NaN, or inf: inf - inf is NaN
  return sign_bit(g) ? from_float<T>(-0.0f) : T{};  // g * 0: a zero with g's sign
}

// The ops in map form (kernels/common/map_variants.h): one item per element.
template <class T>
struct ReluMap {
  std::size_t n;
  const T* features;
  explicit ReluMap(const KernelArgs& a)
      : n(static_cast<std::size_t>(a.problem.geom<Geometry>().elements)), features(a.in<T>(0)) {}
  std::size_t items() const { return n; }
  D9M_HD void operator()(std::size_t i, T* out) const { out[i] = relu(features[i]); }
};

template <class T>
struct ReluGradMap {
  std::size_t n;
  const T* gradients;
  const T* features;
  explicit ReluGradMap(const KernelArgs& a)
      : n(static_cast<std::size_t>(a.problem.geom<Geometry>().elements)), gradients(a.in<T>(0)), features(a.in<T>(1)) {}
  std::size_t items() const { return n; }
  D9M_HD void operator()(std::size_t i, T* out) const { out[i] = relu_grad(gradients[i], features[i]); }
};

}  // namespace d9m::activation
