#include <cublas_api.h>
#include <cuda/version>  // the toolkit's CCCL: this file is compiled without the pinned wheel's
#include <cudnn.h>
#include <cusparse.h>
#include <dlfcn.h>

#include <string>
#include <vector>

#include "harness/core/cuda_versions.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/common/vendor_libs.h"
#include "kernels/reduce/cccl_version.h"

namespace d9m {

namespace {
std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
// CCCL_VERSION encodes major * 1000000 + minor * 1000 + patch.
std::string cccl_version_string(int v) {
  return std::to_string(v / 1000000) + "." + std::to_string(v / 1000 % 1000) + "." + std::to_string(v % 1000);
}
std::string cudnn_version_string(std::size_t v) {
  // cuDNN 9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// A library's loaded version, from the library the loader picks: the cuBLAS the matmul family's
// variants run and the cuSPARSE the sparse family's run, which a framework on this machine would
// run too. Both answer <lib>GetProperty(MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2)
// with status 0. The headers' own major version first: the one the variants load
// (kernels/common/vendor_libs.h). From the cache where it is still right (library_version.h):
// loading cuBLAS only to read this costs about 0.1 s.
nlohmann::json loaded_version(const char* library, std::vector<std::string> sonames, const char* get_property,
                              const LibraryVersionCache* cache) {
  auto read = [get_property](void* handle) -> nlohmann::json {
    using GetProperty = int (*)(int, int*);
    auto get = reinterpret_cast<GetProperty>(dlsym(handle, get_property));
    int major = 0, minor = 0, patch = 0;
    if (get && get(0, &major) == 0 && get(1, &minor) == 0 && get(2, &patch) == 0)
      return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    return nullptr;
  };
  return library_version({library, std::move(sonames), read}, cache).version;
}
nlohmann::json loaded_cublas(const LibraryVersionCache* cache) {
  return loaded_version("cublas", {vendor::cublas_soname(), "libcublas.so.13", "libcublas.so.12", "libcublas.so"}, "cublasGetProperty",
                        cache);
}
nlohmann::json loaded_cusparse(const LibraryVersionCache* cache) {
  return loaded_version("cusparse", {vendor::cusparse_soname(), "libcusparse.so.12", "libcusparse.so.13", "libcusparse.so"},
                        "cusparseGetProperty", cache);
}
}  // namespace

nlohmann::json cuda_library_versions(const LibraryVersionCache* cache) {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 without a driver
  cudaGetLastError();
  return {{"runtime_compiled", cuda_version_string(CUDART_VERSION)},
          {"runtime_loaded", cuda_version_string(runtime)},
          {"driver_supports", driver ? nlohmann::json(cuda_version_string(driver)) : nlohmann::json(nullptr)},
          {"cudnn_compiled", cudnn_version_string(CUDNN_VERSION)},
          {"cudnn_loaded", cudnn_version_string(cudnnGetVersion())},
          {"cublas_compiled", std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR) + "." +
                                  std::to_string(CUBLAS_VER_PATCH)},
          {"cublas_loaded", loaded_cublas(cache)},
          {"cusparse_compiled", std::to_string(CUSPARSE_VER_MAJOR) + "." + std::to_string(CUSPARSE_VER_MINOR) + "." +
                                    std::to_string(CUSPARSE_VER_PATCH)},
          {"cusparse_loaded", loaded_cusparse(cache)},
          // Header-only, so compiled is all there is. Two: the toolkit's, which every CUDA file but
          // one sees, and the pinned one the CUB variants (kernels/reduce/reduce_cub.cu) were built with.
          {"cccl_toolkit", cccl_version_string(CCCL_VERSION)},
          {"cccl_cub_variants", cccl_version_string(reduce::cccl_version_of_cub_variants())},
          // Header-only too: the frontend the attention family's cuDNN variants were built with.
          {"cudnn_frontend", std::to_string(attention::cudnn_frontend_version() / 10000) + "." +
                                 std::to_string(attention::cudnn_frontend_version() / 100 % 100) + "." +
                                 std::to_string(attention::cudnn_frontend_version() % 100)},
          {"architectures", D9M_CUDA_ARCHITECTURES}};
}

}  // namespace d9m
