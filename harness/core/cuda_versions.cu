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

// A library's loaded version, read from the library the loader picks: the cuBLAS the matmul
// family's variants run and the cuSPARSE the sparse family's run, which a framework on this
// machine would run too. The harness library asks by name so that it needs no link of its own.
// Both answer <lib>GetProperty(MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2) with status 0.
//
// The headers' own major version first: the one the variants load (kernels/common/vendor_libs.h).
// RTLD_NODELETE: the library stays mapped once asked, so a variant that calls it later finds it
// loaded rather than loading it again (cuBLASLt's initialisers are most of a CUDA build's start).
nlohmann::json loaded_version(const std::vector<std::string>& sonames, const char* get_property) {
  for (const std::string& name : sonames) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) continue;
    using GetProperty = int (*)(int, int*);
    auto get = reinterpret_cast<GetProperty>(dlsym(h, get_property));
    int major = 0, minor = 0, patch = 0;
    nlohmann::json v = nullptr;
    if (get && get(0, &major) == 0 && get(1, &minor) == 0 && get(2, &patch) == 0)
      v = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    dlclose(h);
    return v;
  }
  return nullptr;
}
nlohmann::json loaded_cublas() {
  return loaded_version({vendor::cublas_soname(), "libcublas.so.13", "libcublas.so.12", "libcublas.so"}, "cublasGetProperty");
}
nlohmann::json loaded_cusparse() {
  return loaded_version({vendor::cusparse_soname(), "libcusparse.so.12", "libcusparse.so.13", "libcusparse.so"}, "cusparseGetProperty");
}
}  // namespace

nlohmann::json cuda_library_versions() {
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
          {"cublas_loaded", loaded_cublas()},
          {"cusparse_compiled", std::to_string(CUSPARSE_VER_MAJOR) + "." + std::to_string(CUSPARSE_VER_MINOR) + "." +
                                    std::to_string(CUSPARSE_VER_PATCH)},
          {"cusparse_loaded", loaded_cusparse()},
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
