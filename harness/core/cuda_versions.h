// Versions of the CUDA libraries, compiled against and loaded, for the fingerprint: null in a
// build without CUDA. Asks nothing of a GPU: these answer without a device.
#pragma once
#include <nlohmann/json.hpp>

namespace d9m {
nlohmann::json cuda_library_versions();
}
