// cuBLAS, cuBLASLt, cuSPARSE and NVRTC, loaded when a variant first calls them instead of when d9m
// starts. Linked, they cost every start of a CUDA build 100-150 ms (cuBLASLt's initialisers alone
// 75-80 ms; docs/PERFORMANCE.md, "Start of a CUDA build"), with no GPU and no library variant in
// the run, and the worker process paid it again. Each table holds the functions d9m calls, typed
// from the library's own header, resolved with dlsym from the soname of the major version the
// headers are (libcublas.so.13 for CUDA 13's): calls read `vendor::cublas().cublasGemmEx(...)`.
// A library that is missing or lacks a function fails the case that needs it (ERROR, with what
// dlopen or dlsym said), not the start of d9m.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <nvrtc.h>

#include <string>

// The symbols, as the libraries export them (cublas_v2.h maps cublasCreate to cublasCreate_v2,
// so calls may use either name). A function d9m starts calling must be added here.
#define D9M_CUBLAS_FUNCTIONS(X)                                                                                  \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetWorkspace_v2) X(cublasSetAtomicsMode) \
  X(cublasSsymv_v2) X(cublasDsymv_v2) X(cublasGetStatusName) X(cublasGetStatusString)
// Overloaded in C++ (cublas_api.h keeps inline wrappers that take the old cudaDataType compute
// type), so decltype cannot name them: their exported form's type is spelled out, and
// vendor_libs.cu checks it against the header by taking their address at that type.
#define D9M_CUBLAS_OVERLOADED_FUNCTIONS(X) X(cublasGemmEx, GemmEx) X(cublasGemmStridedBatchedEx, GemmStridedBatchedEx)
#define D9M_CUBLASLT_FUNCTIONS(X)                                                                                 \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoConfigGetAttribute)                 \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                     \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)         \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)           \
  X(cublasLtMatrixLayoutSetAttribute)
#define D9M_CUSPARSE_FUNCTIONS(X)                                                                                 \
  X(cusparseCreate) X(cusparseDestroy) X(cusparseSetStream) X(cusparseGetErrorName) X(cusparseGetErrorString)    \
  X(cusparseCreateCoo) X(cusparseCreateCsr) X(cusparseCooSetPointers) X(cusparseCsrSetPointers)                  \
  X(cusparseDestroySpMat) X(cusparseCreateDnMat) X(cusparseDestroyDnMat) X(cusparseDnMatSetValues)               \
  X(cusparseCreateDnVec) X(cusparseDestroyDnVec) X(cusparseDnVecSetValues) X(cusparseSpMM)                       \
  X(cusparseSpMM_bufferSize) X(cusparseSpMM_preprocess) X(cusparseSpMV) X(cusparseSpMV_bufferSize)               \
  X(cusparseSpMV_preprocess)

// NVRTC is called by the cuDNN frontend (the attention family's cuDNN variants compile its
// open-source engines at run time), by these names, directly. vendor_libs.cu defines each as a
// forward into this table, so the frontend's calls load NVRTC on first use instead of the linker
// mapping it at every start (8-14 ms here). A frontend that starts calling another NVRTC function
// fails to link until it is added here and given its forward.
#define D9M_NVRTC_FUNCTIONS(X)                                                                                    \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)      \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)

#define D9M_VENDOR_POINTER(name) decltype(&::name) name = nullptr;

namespace d9m::vendor {

using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                                  cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                                  cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                                const void*, cudaDataType, int, long long, const void*, cudaDataType, int, long long,
                                                const void*, void*, cudaDataType, int, long long, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);
#define D9M_VENDOR_TYPED_POINTER(name, type) type name = nullptr;

struct Cublas {
  D9M_CUBLAS_FUNCTIONS(D9M_VENDOR_POINTER)
  D9M_CUBLAS_OVERLOADED_FUNCTIONS(D9M_VENDOR_TYPED_POINTER)
};
struct CublasLt {
  D9M_CUBLASLT_FUNCTIONS(D9M_VENDOR_POINTER)
};
struct Cusparse {
  D9M_CUSPARSE_FUNCTIONS(D9M_VENDOR_POINTER)
};
struct Nvrtc {
  D9M_NVRTC_FUNCTIONS(D9M_VENDOR_POINTER)
};

// Loaded and resolved on the first call (thread-safe); throws std::runtime_error naming the
// library and what failed, and tries again on the next call.
const Cublas& cublas();
const CublasLt& cublas_lt();
const Cusparse& cusparse();
const Nvrtc& nvrtc();

// The sonames they are loaded from.
std::string cublas_soname();
std::string cublas_lt_soname();
std::string cusparse_soname();
std::string nvrtc_soname();  // NVRTC's major version is the toolkit's

}  // namespace d9m::vendor
