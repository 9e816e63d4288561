// Tensor descriptions shared by the kernels and the harness. Kernels receive raw pointers in
// the memory of their backend; these types only say what the bytes are.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace d9m {

enum class DType : std::uint8_t { f32, i32 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 4; }
std::string_view dtype_name(DType t);  // NumPy-style: "float32", "int32"

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& s);
std::string shape_string(const Shape& s);  // "[2,8,8,3]"

// One named argument or result of an op. Names follow the TensorFlow op's arguments.
struct TensorDesc {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;

  std::int64_t numel() const { return d9m::numel(shape); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
};

}  // namespace d9m
