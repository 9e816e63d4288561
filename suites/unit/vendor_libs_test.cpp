// cuBLAS, cuBLASLt and cuSPARSE are loaded on first use (kernels/common/vendor_libs.h), not linked:
// every function d9m calls must resolve from the library of the headers' major version, and d9m
// must not load them merely to start. Both hold without a GPU (the libraries load and answer
// their status strings on any machine with the toolkit), so they are checked here, not at the
// device boundary only.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>

#include <string>
#include <vector>

#if D9M_WITH_CUDA
#include "kernels/common/vendor_libs.h"
#endif

namespace d9m {
namespace {

#if D9M_WITH_CUDA
bool loaded(const std::string& soname) {
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

// The libraries this executable names as needed (its DT_NEEDED entries, read from its dynamic
// section in memory): what the loader maps before main.
std::vector<std::string> needed_by_this_executable() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) return 0;  // the executable comes with an empty name
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
          const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
          const char* strtab = nullptr;
          for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
          for (const ElfW(Dyn)* d = dyn; strtab && d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_NEEDED) static_cast<std::vector<std::string>*>(out)->push_back(strtab + d->d_un.d_val);
        }
        return 1;
      },
      &names);
  return names;
}

#define D9M_EXPECT_RESOLVED(name) EXPECT_NE(api.name, nullptr) << #name;
#define D9M_EXPECT_RESOLVED_TYPED(name, type) EXPECT_NE(api.name, nullptr) << #name;

TEST(VendorLibraries, AreNotLoadedToStartThenEveryFunctionD9mCallsResolves) {
  // Not linked (this executable links the kernels as d9m does), so not loaded merely to start.
  const auto needed = needed_by_this_executable();
  EXPECT_FALSE(needed.empty()) << "no DT_NEEDED read: the check below would prove nothing";
  for (const auto& name : needed) {
    EXPECT_EQ(name.rfind("libcublas", 0), std::string::npos) << name;
    EXPECT_EQ(name.rfind("libcusparse", 0), std::string::npos) << name;
    EXPECT_EQ(name.rfind("libnvrtc", 0), std::string::npos) << name;
  }
  {
    const auto& api = vendor::cublas();
    D9M_CUBLAS_FUNCTIONS(D9M_EXPECT_RESOLVED)
    D9M_CUBLAS_OVERLOADED_FUNCTIONS(D9M_EXPECT_RESOLVED_TYPED)
    EXPECT_STREQ(api.cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  }
  {
    const auto& api = vendor::cublas_lt();
    D9M_CUBLASLT_FUNCTIONS(D9M_EXPECT_RESOLVED)
  }
  {
    const auto& api = vendor::cusparse();
    D9M_CUSPARSE_FUNCTIONS(D9M_EXPECT_RESOLVED)
    EXPECT_STREQ(api.cusparseGetErrorName(CUSPARSE_STATUS_NOT_SUPPORTED), "CUSPARSE_STATUS_NOT_SUPPORTED");
  }
  EXPECT_TRUE(loaded(vendor::cublas_soname()));
  EXPECT_TRUE(loaded(vendor::cublas_lt_soname()));
  EXPECT_TRUE(loaded(vendor::cusparse_soname()));
}

// The NVRTC functions the cuDNN frontend calls are d9m's forwards (vendor_libs.cu): through them,
// as the frontend calls them, a kernel compiles to a cubin (no GPU needed) and a broken one gives
// its log; NVRTC was loaded by the first call.
TEST(VendorLibraries, TheFrontendsNvrtcCallsLoadNvrtcAndCompile) {
  // The forwards are not exported: a library that loads NVRTC itself must not find them.
  void* self = dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(dlsym(self, "nvrtcCreateProgram"), nullptr) << "the executable exports an NVRTC function";
  dlclose(self);
  auto compile = [](const char* src, std::string& log, std::size_t& cubin_bytes) {
    nvrtcProgram p = nullptr;
    EXPECT_EQ(nvrtcCreateProgram(&p, src, "k.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
    const char* options[] = {"--gpu-architecture=sm_90"};
    const nvrtcResult r = nvrtcCompileProgram(p, 1, options);
    std::size_t n = 0;
    EXPECT_EQ(nvrtcGetProgramLogSize(p, &n), NVRTC_SUCCESS);
    log.assign(n, '\0');
    EXPECT_EQ(nvrtcGetProgramLog(p, log.data()), NVRTC_SUCCESS);
    cubin_bytes = 0;
    if (r == NVRTC_SUCCESS) {
      EXPECT_EQ(nvrtcGetCUBINSize(p, &cubin_bytes), NVRTC_SUCCESS);
      std::string cubin(cubin_bytes, '\0');
      EXPECT_EQ(nvrtcGetCUBIN(p, cubin.data()), NVRTC_SUCCESS);
      EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF");
    }
    EXPECT_EQ(nvrtcDestroyProgram(&p), NVRTC_SUCCESS);
    return r;
  };
  std::string log;
  std::size_t bytes = 0;
  // (Run alone, as ctest runs it, nothing has loaded NVRTC before: the first forward loads it.)
  EXPECT_EQ(compile("extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }", log, bytes), NVRTC_SUCCESS) << log;
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(compile("__global__ void broken( { }", log, bytes), NVRTC_ERROR_COMPILATION);
  EXPECT_NE(log.find("error"), std::string::npos) << log;
  EXPECT_TRUE(loaded(vendor::nvrtc_soname()));
  const auto& api = vendor::nvrtc();
  D9M_NVRTC_FUNCTIONS(D9M_EXPECT_RESOLVED)
}
#else
TEST(VendorLibraries, AreNotLoadedToStartThenEveryFunctionD9mCallsResolves) { GTEST_SKIP() << "a build without CUDA"; }
#endif

}  // namespace
}  // namespace d9m
