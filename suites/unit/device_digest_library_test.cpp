// libd9m_device_digest.so (bindings/device_digest), as the PyTorch hook loads it: through dlopen
// and its C function alone. What needs no GPU: it loads, and refuses bad calls with a message
// instead of crashing. suites/gpu/gpu_test.cpp checks its digests against the host's on a GPU.
#ifdef D9M_DEVICE_DIGEST_LIBRARY
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

using DeviceDigest = int (*)(const void*, unsigned long long, int, void*, char*, char*, unsigned long long);

DeviceDigest load() {
  void* lib = ::dlopen(D9M_DEVICE_DIGEST_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  return reinterpret_cast<DeviceDigest>(::dlsym(lib, "d9m_device_digest"));
}

TEST(DeviceDigestLibrary, LoadsAndExportsItsCFunctionOnly) {
  void* lib = ::dlopen(D9M_DEVICE_DIGEST_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(lib, "d9m_device_digest"), nullptr);
  // The CUDA runtime linked into it stays hidden: a process with its own runtime (PyTorch's)
  // keeps calling its own.
  EXPECT_EQ(::dlsym(lib, "cudaMalloc"), nullptr);
}

TEST(DeviceDigestLibrary, RefusesBadCallsWithAMessage) {
  const DeviceDigest f = load();
  ASSERT_NE(f, nullptr) << ::dlerror();
  char hex[33] = "", error[256] = "";
  int x = 0;
  EXPECT_EQ(f(&x, sizeof x, 0, nullptr, nullptr, error, sizeof error), -1);
  EXPECT_NE(std::string(error).find("hex_out is NULL"), std::string::npos) << error;
  EXPECT_EQ(f(nullptr, 16, 0, nullptr, hex, error, sizeof error), -1);
  EXPECT_NE(std::string(error).find("data is NULL"), std::string::npos) << error;
  // No such device: here "no CUDA device 9999", or the CUDA error of a machine without a driver.
  error[0] = '\0';
  EXPECT_EQ(f(&x, sizeof x, 9999, nullptr, hex, error, sizeof error), -1);
  EXPECT_GT(std::strlen(error), 0u);
  EXPECT_STREQ(hex, "") << "a refused call wrote a digest";
  // A message longer than the caller's buffer is cut and still terminated.
  char tiny[8];
  std::memset(tiny, 'x', sizeof tiny);
  EXPECT_EQ(f(nullptr, 16, 0, nullptr, hex, tiny, sizeof tiny), -1);
  EXPECT_EQ(std::strlen(tiny), sizeof tiny - 1);
}

}  // namespace
#endif
