#include "harness/core/npy.h"

#include <sys/stat.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "harness/core/error.h"

namespace d9m {

static_assert(std::endian::native == std::endian::little, "d9m writes little-endian .npy as it is in memory");

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out.flush()) {
      std::remove(tmp.c_str());
      fail_environment(path + ": cannot write (" + std::strerror(errno) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail_environment(path + ": cannot write (" + std::strerror(errno) + ")");
  }
}

void write_npy(const std::string& path, const TensorDesc& desc, const void* data) {
  std::string shape = "(";
  for (std::size_t i = 0; i < desc.shape.size(); ++i) shape += std::to_string(desc.shape[i]) + ",";
  if (desc.shape.size() > 1) shape.pop_back();  // "(5,)" keeps its comma, "(2,3)" does not
  shape += ")";
  std::string header = std::string("{'descr': '") + (desc.dtype == DType::f32 ? "<f4" : "<i4") +
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

void make_dirs(const std::string& path) {
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
      fail_environment(partial + ": cannot create folder (" + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail_environment(path + ": not a folder");
}

}  // namespace d9m
