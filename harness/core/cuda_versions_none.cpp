#include "harness/core/cuda_versions.h"

namespace d9m {
nlohmann::json cuda_library_versions(const LibraryVersionCache*) { return nullptr; }
}  // namespace d9m
