#include "kernels/common/tensor.h"

namespace d9m {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
  }
  return "?";
}

std::string_view dtype_short_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
  }
  return "?";
}

std::optional<DType> float_dtype_from_short_name(std::string_view s) {
  for (DType t : kFloatDTypes)
    if (dtype_short_name(t) == s) return t;
  return std::nullopt;
}

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace d9m
