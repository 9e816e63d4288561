// Calls f with a value of the C++ storage type of a float dtype (float, double, Half, BFloat16),
// so a variant written as a template runs at the config's precision:
//   with_float_type(a.problem.dtype, [&](auto tag) { using T = decltype(tag); ... });
#pragma once
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/common/half.h"
#include "kernels/common/tensor.h"
#include "kernels/registry.h"

namespace d9m {

template <class F>
decltype(auto) with_float_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(Half{});
    case DType::bf16: return f(BFloat16{});
    case DType::i32: break;
  }
  // The catalogue gives float tensors float dtypes only (registry.cpp, catalog.cpp).
  throw std::logic_error("with_float_type: " + std::string(dtype_name(dtype)) + " is not a float dtype");
}

// A variant's run written as f(args, tag), called at the config's dtype: `.run = typed(...)`.
template <class F>
std::function<void(const KernelArgs&)> typed(F f) {
  return [f](const KernelArgs& a) { with_float_type(a.problem.dtype, [&](auto tag) { f(a, tag); }); };
}

}  // namespace d9m
