#include "harness/core/npy.h"

#include <bit>

#include "harness/core/files.h"

namespace d9m {

static_assert(std::endian::native == std::endian::little, "d9m writes little-endian .npy as it is in memory");

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::i32: return "<i4";
    case DType::f16: return "<f2";
    case DType::f64: return "<f8";
    case DType::bf16: return "<u2";  // NumPy has no bfloat16: the raw bits (config.json names the dtype)
  }
  return "|V1";
}

void write_npy(const std::string& path, const TensorDesc& desc, const void* data) {
  std::string shape = "(";
  for (std::size_t i = 0; i < desc.shape.size(); ++i) shape += std::to_string(desc.shape[i]) + ",";
  if (desc.shape.size() > 1) shape.pop_back();  // "(5,)" keeps its comma, "(2,3)" does not
  shape += ")";
  std::string header = std::string("{'descr': '") + npy_descr(desc.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64
  // and ended by a newline.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string file("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  file.append(static_cast<const char*>(data), desc.bytes());
  write_file_atomically(path, file);
}

}  // namespace d9m
