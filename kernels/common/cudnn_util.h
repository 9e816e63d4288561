// cuDNN helpers for host code: checked calls that name the call and the place, RAII handle and
// descriptors (legacy and backend), and the status categories that make a case UNSUPPORTED.
// cudnn_util.cuh adds device code; this header stays plain C++ for files the host compiler builds
// (the cuDNN frontend's, kernels/attention/attention_cudnn.cpp).
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

// The status's name, and cuDNN's own message for the calling thread's last failure where it
// kept one (cuDNN 9: it names the unsupported feature, the reason an UNSUPPORTED case gives).
inline std::string status_text(cudnnStatus_t s) {
  std::string text = cudnnGetErrorString(s);
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) text += std::string(" (") + detail + ")";
  return text;
}

[[noreturn]] inline void fail(cudnnStatus_t s, const char* call, const char* file, int line) {
  throw Error(s, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + status_text(s));
}

// cuDNN 9 statuses come in categories: every CUDNN_STATUS_NOT_SUPPORTED_* (shape, layout,
// padding, architecture, ...) says that this call cannot run this config.
inline bool not_supported(cudnnStatus_t s) { return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED; }

// A call that reports "not supported" is a status of the case (UNSUPPORTED), not an error.
inline void run_checked(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (not_supported(s)) throw Unsupported(std::string("cuDNN: ") + call + ": " + status_text(s));
  if (s != CUDNN_STATUS_SUCCESS) fail(s, call, file, line);
}

}  // namespace d9m::cudnn

#define D9M_CUDNN_CHECK(call)                                                  \
  do {                                                                         \
    const cudnnStatus_t d9m_cudnn_status_ = (call);                            \
    if (d9m_cudnn_status_ != CUDNN_STATUS_SUCCESS)                             \
      ::d9m::cudnn::fail(d9m_cudnn_status_, #call, __FILE__, __LINE__);        \
  } while (0)

// The same, except that a "not supported" status throws Unsupported (the case is UNSUPPORTED).
#define D9M_CUDNN_SUPPORTED(call) ::d9m::cudnn::run_checked((call), #call, __FILE__, __LINE__)

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

// A descriptor of the backend (graph) API, created empty of its type; destroy never throws.
class BackendDesc {
 public:
  explicit BackendDesc(cudnnBackendDescriptorType_t type) { D9M_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~BackendDesc() { if (d_) cudnnBackendDestroyDescriptor(d_); }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  // Address of the handle, for attributes that take descriptors (CUDNN_TYPE_BACKEND_DESCRIPTOR).
  const cudnnBackendDescriptor_t* ptr() const { return &d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// alpha = 1 and beta = 0 as cuDNN reads them: double for double data, float otherwise.
struct Scaling {
  float alpha_f = 1.0f, beta_f = 0.0f;
  double alpha_d = 1.0, beta_d = 0.0;
  bool f64;
  explicit Scaling(DType t) : f64(t == DType::f64) {}
  const void* alpha() const { return f64 ? static_cast<const void*>(&alpha_d) : &alpha_f; }
  const void* beta() const { return f64 ? static_cast<const void*>(&beta_d) : &beta_f; }
};

// cuDNN's element type of a float dtype.
inline cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
  }
}

}  // namespace d9m::cudnn
