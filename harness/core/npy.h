// NumPy .npy files (format version 1.0): little-endian, C order, so a user can load what a case
// saw and produced with numpy.load and look for themselves.
#pragma once
#include <string>

#include "harness/core/inputs.h"

namespace d9m {

// The .npy type of a dtype: "<f4", "<i4", "<f2", "<f8"; bfloat16, which NumPy lacks, is written
// as its bits, "<u2" (widen with (x.astype(np.uint32) << 16).view(np.float32)).
const char* npy_descr(DType dtype);

// Writes with write_file_atomically (harness/core/files.h): a reader never sees half a file.
void write_npy(const std::string& path, const TensorDesc& desc, const void* data);

}  // namespace d9m
