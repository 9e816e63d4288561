// d9m-digest-v1 and diff stats computed on the device (CUDA builds only). Per trial only the
// 16-byte digest, and for a differing trial the diff stats, cross to the host.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "harness/digest.h"
#include "harness/store.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/tensor.h"

namespace d9m {

class GpuDigester {
 public:
  explicit GpuDigester(cudaStream_t stream) : stream_(stream) {}
  // Digest of `bytes` bytes at device pointer `data`; synchronises the stream.
  Digest128 digest(const void* data, std::size_t bytes);
  // Element-wise comparison of two device buffers of one dtype; synchronises the stream.
  DiffStats diff(DType dtype, const void* first, const void* other, std::int64_t elements);

 private:
  cudaStream_t stream_;
  DeviceBuffer leaves_, result_;
};

}  // namespace d9m
