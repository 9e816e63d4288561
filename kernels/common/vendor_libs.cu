#include "kernels/common/vendor_libs.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <type_traits>

namespace d9m::vendor {

namespace {

void* open_library(const std::string& soname) {
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw std::runtime_error("cannot load " + soname + ": " + (why ? why : "dlopen failed"));
  }
  return h;  // kept for the life of the process, as a linked library would be
}

template <class F>
void resolve(void* library, const std::string& soname, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(library, name));
  if (!f) throw std::runtime_error(soname + " has no " + name + " (a library older than the headers d9m was built with?)");
}

}  // namespace

std::string cublas_soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }
std::string cublas_lt_soname() { return "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR); }
std::string cusparse_soname() { return "libcusparse.so." + std::to_string(CUSPARSE_VER_MAJOR); }
std::string nvrtc_soname() { return "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000); }

// The spelled-out types of the overloaded functions are the exported ones: the cast picks the
// overload of that exact type, or fails to compile. Unevaluated, so it references no symbol (a
// variable holding the address would, at -O0, and d9m no longer links cuBLAS).
#define D9M_VENDOR_CHECK_TYPE(name, type) static_assert(std::is_same_v<decltype(static_cast<type>(&::name)), type>);
D9M_CUBLAS_OVERLOADED_FUNCTIONS(D9M_VENDOR_CHECK_TYPE)

namespace {

// A table loaded from `soname`: fill(get, api) names each function, get(name, pointer) resolves it.
template <class Table, class Fill>
Table load(const std::string& soname, Fill fill) {
  void* library = open_library(soname);
  Table api;
  fill([&](const char* name, auto& f) { resolve(library, soname, name, f); }, api);
  return api;
}

}  // namespace

#define D9M_VENDOR_RESOLVE(name) get(#name, api.name);
#define D9M_VENDOR_RESOLVE_TYPED(name, type) get(#name, api.name);

const Cublas& cublas() {
  static const Cublas table = load<Cublas>(cublas_soname(), [](auto get, Cublas& api) {
    D9M_CUBLAS_FUNCTIONS(D9M_VENDOR_RESOLVE)
    D9M_CUBLAS_OVERLOADED_FUNCTIONS(D9M_VENDOR_RESOLVE_TYPED)
  });
  return table;
}

const CublasLt& cublas_lt() {
  static const CublasLt table =
      load<CublasLt>(cublas_lt_soname(), [](auto get, CublasLt& api) { D9M_CUBLASLT_FUNCTIONS(D9M_VENDOR_RESOLVE) });
  return table;
}

const Cusparse& cusparse() {
  static const Cusparse table =
      load<Cusparse>(cusparse_soname(), [](auto get, Cusparse& api) { D9M_CUSPARSE_FUNCTIONS(D9M_VENDOR_RESOLVE) });
  return table;
}

const Nvrtc& nvrtc() {
  static const Nvrtc table = load<Nvrtc>(nvrtc_soname(), [](auto get, Nvrtc& api) { D9M_NVRTC_FUNCTIONS(D9M_VENDOR_RESOLVE) });
  return table;
}

namespace {

// A call of the frontend's into NVRTC. An NVRTC that cannot be loaded is an error code to the
// frontend (which fails the case that needed it), said once on stderr with dlopen's reason: an
// exception must not unwind through the frontend's C-style call sites.
void say_once(const char* what) {
  static std::once_flag said;
  std::call_once(said, [&] { std::fprintf(stderr, "d9m: %s\n", what); });
}

template <class F, class... A>
nvrtcResult forward(F Nvrtc::*function, A... args) {
  try {
    return (nvrtc().*function)(args...);
  } catch (const std::exception& e) {
    say_once(e.what());
    return NVRTC_ERROR_INTERNAL_ERROR;
  }
}

}  // namespace

}  // namespace d9m::vendor

// The NVRTC functions the cuDNN frontend calls, defined here (the declarations are nvrtc.h's) as
// forwards into the table above. Not exported: the executables export no symbols, so libraries
// that load the real NVRTC themselves (cuDNN's runtime-compiled engines) see only NVRTC's own.
using d9m::vendor::forward;
using d9m::vendor::Nvrtc;
extern "C" {
nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int num_headers, const char* const* headers,
                               const char* const* include_names) {
  return forward(&Nvrtc::nvrtcCreateProgram, prog, src, name, num_headers, headers, include_names);
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) { return forward(&Nvrtc::nvrtcDestroyProgram, prog); }
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char* const* options) {
  return forward(&Nvrtc::nvrtcCompileProgram, prog, num_options, options);
}
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* size) { return forward(&Nvrtc::nvrtcGetCUBINSize, prog, size); }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) { return forward(&Nvrtc::nvrtcGetCUBIN, prog, cubin); }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) { return forward(&Nvrtc::nvrtcGetProgramLogSize, prog, size); }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) { return forward(&Nvrtc::nvrtcGetProgramLog, prog, log); }
}
