// Checked CUDA calls and RAII device memory. Every CUDA (and cuDNN) call goes through a macro
// that names the call and the place, so an error in an audit log points at the line.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace d9m {

// A CUDA error, with its code so the harness can tell "this case failed" from "the context is
// poisoned" (sticky errors such as an illegal address: no further device work can succeed).
struct CudaError : std::runtime_error {
  CudaError(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
  cudaError_t code;
  bool sticky() const {
    return code == cudaErrorIllegalAddress || code == cudaErrorLaunchFailure || code == cudaErrorHardwareStackError ||
           code == cudaErrorIllegalInstruction || code == cudaErrorMisalignedAddress || code == cudaErrorInvalidPc ||
           code == cudaErrorAssert || code == cudaErrorECCUncorrectable;
  }
};

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw CudaError(e, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                         cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace d9m

#define D9M_CUDA_CHECK(call)                                                 \
  do {                                                                       \
    const cudaError_t d9m_cuda_status_ = (call);                             \
    if (d9m_cuda_status_ != cudaSuccess)                                     \
      ::d9m::throw_cuda(d9m_cuda_status_, #call, __FILE__, __LINE__);        \
  } while (0)

// After a kernel launch: reports launch-configuration errors at the launch site.
#define D9M_CUDA_CHECK_LAUNCH() D9M_CUDA_CHECK(cudaGetLastError())

namespace d9m {

// Device memory owned by one stream: allocated and freed stream-ordered, so a variant's
// temporaries cost what the frameworks' caching allocators cost, not a device synchronisation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {
    if (bytes) D9M_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);  // never throws from a destructor
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_), stream_(o.stream_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T = void> T* get() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Device memory a variant's state owns for all its trials.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    if (bytes) D9M_CUDA_CHECK(cudaMalloc(&p_, bytes));
  }
  ~DeviceMemory() { cudaFree(p_); }
  DeviceMemory(DeviceMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory, so a device-to-host copy is one DMA instead of a staged copy.
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(std::size_t bytes) : bytes_(bytes) { D9M_CUDA_CHECK(cudaMallocHost(&ptr_, std::max<std::size_t>(bytes, 1))); }
  ~PinnedHostBuffer() { cudaFreeHost(ptr_); }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  template <class T = void> T* get() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

inline unsigned blocks_for(std::size_t n, unsigned threads = 256) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace d9m
