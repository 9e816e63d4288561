// cuBLAS helpers: a checked call that names the call and the place, with NOT_SUPPORTED turned
// into UNSUPPORTED (a status of the case, not an error of the run).
#pragma once
#include <cublas_api.h>

#include "kernels/common/vendor_libs.h"

#include <stdexcept>
#include <string>

#include "kernels/registry.h"

namespace d9m::cublas {

inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) throw Unsupported(std::string("cuBLAS: ") + call + ": " + vendor::cublas().cublasGetStatusString(s));
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + vendor::cublas().cublasGetStatusName(s) +
                           " (" + vendor::cublas().cublasGetStatusString(s) + ")");
}

}  // namespace d9m::cublas

#define D9M_CUBLAS_CHECK(call) ::d9m::cublas::check((call), #call, __FILE__, __LINE__)
