// The C interface of d9m_device_digest.h over GpuDigester. One digester per (device, stream) and
// thread, kept for the thread's life: its scratch buffers grow to the largest buffer seen, so a
// traced training step allocates only on its first ops.
#include "bindings/device_digest/d9m_device_digest.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "harness/core/gpu_digest.h"

namespace {

void set_error(char* error, unsigned long long error_len, const std::string& message) {
  if (!error || error_len == 0) return;
  const std::size_t n = std::min<std::size_t>(message.size(), error_len - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// The device is switched for the call and switched back, so the caller's current device is kept.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    D9M_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device != previous_) D9M_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CurrentDevice() { cudaSetDevice(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) int d9m_device_digest(const void* data, unsigned long long bytes, int device,
                                                                       void* stream, char* hex_out, char* error,
                                                                       unsigned long long error_len) {
  try {
    if (!hex_out) throw std::invalid_argument("d9m_device_digest: hex_out is NULL");
    if (!data && bytes) throw std::invalid_argument("d9m_device_digest: data is NULL");
    int devices = 0;
    D9M_CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (device < 0 || device >= devices)
      throw std::invalid_argument("d9m_device_digest: no CUDA device " + std::to_string(device) + " (" + std::to_string(devices) + " present)");
    // A host pointer would be read by the kernels as a device address: refuse what is not device
    // (or managed) memory of that device.
    if (bytes) {
      cudaPointerAttributes attr{};
      D9M_CUDA_CHECK(cudaPointerGetAttributes(&attr, data));
      if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
        throw std::invalid_argument("d9m_device_digest: the pointer is not device memory");
      if (attr.device != device)
        throw std::invalid_argument("d9m_device_digest: the pointer is memory of device " + std::to_string(attr.device) + ", not " +
                                    std::to_string(device));
    }
    const CurrentDevice on(device);
    thread_local std::map<std::pair<int, void*>, std::unique_ptr<d9m::GpuDigester>> digesters;
    auto& digester = digesters[{device, stream}];
    if (!digester) digester = std::make_unique<d9m::GpuDigester>(static_cast<cudaStream_t>(stream));
    const d9m::Digest128 d = digester->digest(data, bytes);
    // XXH128's canonical form, high half first, as Digest128::hex() prints it.
    std::snprintf(hex_out, 33, "%016llx%016llx", static_cast<unsigned long long>(d.high), static_cast<unsigned long long>(d.low));
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_len, e.what());
  } catch (...) {
    set_error(error, error_len, "d9m_device_digest: unknown error");
  }
  return -1;
}
