// NumPy .npy files (format version 1.0): little-endian, C order, so a user can load what a case
// saw and produced with numpy.load and look for themselves.
#pragma once
#include <string>

#include "harness/core/inputs.h"

namespace d9m {

// Writes atomically (temporary file, then rename): a reader never sees half a file.
void write_npy(const std::string& path, const TensorDesc& desc, const void* data);

// Writes text atomically, the same way.
void write_file_atomically(const std::string& path, const std::string& text);

// mkdir -p; throws Error(environment) naming the folder that could not be made.
void make_dirs(const std::string& path);

}  // namespace d9m
