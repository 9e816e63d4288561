// Versions of the CUDA libraries, compiled against and loaded, for the fingerprint: null in a
// build without CUDA. Asks nothing of a GPU: these answer without a device. The loaded versions of
// cuBLAS and cuSPARSE come from `cache` where it is still right (harness/core/library_version.h).
#pragma once
#include <nlohmann/json.hpp>

#include "harness/core/library_version.h"

namespace d9m {
nlohmann::json cuda_library_versions(const LibraryVersionCache* cache);
}
