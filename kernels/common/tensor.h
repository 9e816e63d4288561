// Tensor descriptions shared by the kernels and the harness. Kernels receive raw pointers in
// the memory of their backend; these types only say what the bytes are.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace d9m {

// Element types. The float types are the precision axis (DESIGN.md "Precision"): a config names
// one as `dtype` (f32 default), and every float tensor of its op takes it; indices stay i32.
// Half and BFloat16 (kernels/common/half.h) are the 16-bit storage types.
enum class DType : std::uint8_t { f32, i32, f16, bf16, f64 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::f32:
    case DType::i32: return 4;
  }
  return 4;
}
constexpr bool is_float(DType t) { return t != DType::i32; }
std::string_view dtype_name(DType t);  // NumPy-style: "float32", "int32", "float16", "bfloat16", "float64"
// The catalogue's spelling of a float dtype: "f32", "f16", "bf16", "f64" ("i32" for int32).
std::string_view dtype_short_name(DType t);
// The float dtype a catalogue names, or nullopt.
std::optional<DType> float_dtype_from_short_name(std::string_view s);
// Every float dtype, in the catalogue's order of mention.
inline constexpr DType kFloatDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& s);
std::string shape_string(const Shape& s);  // "[2,8,8,3]"

// One named argument or result of an op. Names follow the TensorFlow op's arguments.
struct TensorDesc {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  // A float tensor the framework types as float32 at every precision (TensorFlow's boxes and
  // crops of crop_and_resize): a config's dtype leaves it f32 (with_precision, harness/core).
  bool keeps_f32 = false;

  std::int64_t numel() const { return d9m::numel(shape); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
};

}  // namespace d9m
