// cuDNN helpers: checked calls that name the call and the place, RAII handle and descriptors,
// and a layout transpose (deterministic: each output element is written once).
#pragma once
#include <cudnn.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/common/cuda_check.h"
#include "kernels/registry.h"

namespace d9m::cudnn {

struct Error : std::runtime_error {
  Error(cudnnStatus_t s, const std::string& what) : std::runtime_error(what), status(s) {}
  cudnnStatus_t status;
};

[[noreturn]] inline void fail(cudnnStatus_t s, const char* call, const char* file, int line) {
  throw Error(s, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + cudnnGetErrorString(s));
}

}  // namespace d9m::cudnn

#define D9M_CUDNN_CHECK(call)                                                  \
  do {                                                                         \
    const cudnnStatus_t d9m_cudnn_status_ = (call);                            \
    if (d9m_cudnn_status_ != CUDNN_STATUS_SUCCESS)                             \
      ::d9m::cudnn::fail(d9m_cudnn_status_, #call, __FILE__, __LINE__);        \
  } while (0)

namespace d9m::cudnn {

// cuDNN's legacy descriptors take int. The catalogue keeps every parameter and window within
// 2^31-1 (kMaxIntegerParam in kernels/registry.h, kernels/common/window.h) and every tensor
// within 2^30 elements, so a value past INT_MAX here is a config cuDNN cannot express: the case
// is UNSUPPORTED, naming the value, and never runs on a wrapped, negative size.
inline int descriptor_int(std::int64_t v) {
  if (v < 0 || v > INT_MAX)
    throw Unsupported("cuDNN's descriptors take int: a size, stride, dilation or padding of " + std::to_string(v) + " does not fit");
  return static_cast<int>(v);
}

// A cuDNN object with its create/destroy pair; destroy never throws.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Owned {
 public:
  Owned() { D9M_CUDNN_CHECK(Create(&h_)); }
  ~Owned() { if (h_) Destroy(h_); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return h_; }

 private:
  T h_{};
};

using Handle = Owned<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Owned<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;

// out = in with its 4 axes permuted: out axis j is in axis perm[j]. dims are in's extents.
__global__ void permute4_kernel(const float* in, float* out, long long d0, long long d1, long long d2, long long d3,
                                int p0, int p1, int p2, int p3);

inline void permute4(cudaStream_t s, const float* in, float* out, const std::int64_t (&dims)[4], const int (&perm)[4]) {
  const std::size_t n = static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]);
  if (n == 0) return;
  permute4_kernel<<<blocks_for(n), 256, 0, s>>>(in, out, dims[0], dims[1], dims[2], dims[3], perm[0], perm[1], perm[2], perm[3]);
  D9M_CUDA_CHECK_LAUNCH();
}

}  // namespace d9m::cudnn
