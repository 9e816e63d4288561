// cuSPARSE helpers: checked calls that name the call, the place and cuSPARSE's status.
//   D9M_CUSPARSE_CHECK    a call that must succeed; CUSPARSE_STATUS_NOT_SUPPORTED is UNSUPPORTED
//                         (a status of the case), any other failure an error of the case.
//   D9M_CUSPARSE_ATTEMPT  the calls that ask cuSPARSE whether it takes a config at all (buffer
//                         size, preprocessing): any failure means it does not, so the case is
//                         UNSUPPORTED, with cuSPARSE's own status name and string as the reason.
#pragma once
#include <cusparse.h>

#include "kernels/common/vendor_libs.h"

#include <stdexcept>
#include <string>

#include "kernels/registry.h"

namespace d9m::cusparse {

inline std::string describe(cusparseStatus_t s, const char* call) {
  return std::string("cuSPARSE: ") + call + ": " + vendor::cusparse().cusparseGetErrorName(s) + " (" + vendor::cusparse().cusparseGetErrorString(s) + ")";
}

inline void check(cusparseStatus_t s, const char* call, const char* file, int line) {
  if (s == CUSPARSE_STATUS_SUCCESS) return;
  if (s == CUSPARSE_STATUS_NOT_SUPPORTED) throw Unsupported(describe(s, call));
  throw std::runtime_error(describe(s, call) + " at " + file + ":" + std::to_string(line));
}

inline void attempt(cusparseStatus_t s, const char* call) {
  if (s != CUSPARSE_STATUS_SUCCESS) throw Unsupported(describe(s, call));
}

}  // namespace d9m::cusparse

#define D9M_CUSPARSE_CHECK(call) ::d9m::cusparse::check((call), #call, __FILE__, __LINE__)
#define D9M_CUSPARSE_ATTEMPT(name, call) ::d9m::cusparse::attempt((call), name)
