// cuBLAS's symv with atomics not allowed (its default) and allowed: the one setting cuBLAS
// documents as trading reproducibility for speed (cublasSetAtomicsMode).
#include <cublas_v2.h>

#include <memory>
#include <string>

#include "kernels/common/cublas_util.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/symv/symv.h"

namespace d9m::symv {
namespace {

struct State {
  cublasHandle_t handle = nullptr;
  ~State() {
    if (handle) vendor::cublas().cublasDestroy(handle);
  }
};

Prepared prepare(const Problem& p, const ExecContext& exec, bool atomics) {
  if (p.geom<Geometry>().n > INT_MAX) throw Unsupported("cuBLAS takes int sizes");
  auto st = std::make_shared<State>();
  D9M_CUBLAS_CHECK(vendor::cublas().cublasCreate(&st->handle));
  D9M_CUBLAS_CHECK(vendor::cublas().cublasSetStream(st->handle, static_cast<cudaStream_t>(exec.stream)));
  D9M_CUBLAS_CHECK(vendor::cublas().cublasSetAtomicsMode(st->handle, atomics ? CUBLAS_ATOMICS_ALLOWED : CUBLAS_ATOMICS_NOT_ALLOWED));
  return {st, std::nullopt};
}

// Row-major A is column-major A^T; its lower triangle is the column-major upper one.
void run(const KernelArgs& a) {
  auto& st = *static_cast<State*>(a.state);
  const int n = static_cast<int>(a.problem.geom<Geometry>().n);
  if (a.problem.dtype == DType::f64) {
    const double one = 1, zero = 0;
    D9M_CUBLAS_CHECK(vendor::cublas().cublasDsymv(st.handle, CUBLAS_FILL_MODE_UPPER, n, &one, a.in<double>(0), n, a.in<double>(1), 1, &zero,
                                 a.out<double>(), 1));
  } else {
    const float one = 1, zero = 0;
    D9M_CUBLAS_CHECK(vendor::cublas().cublasSsymv(st.handle, CUBLAS_FILL_MODE_UPPER, n, &one, a.in<float>(0), n, a.in<float>(1), 1, &zero,
                                 a.out<float>(), 1));
  }
}

}  // namespace

D9M_REGISTER_VARIANTS(
    {{.op = "symv", .name = "cublas.symv", .backend = Backend::cuda, .role = Role::vendor,
      .claim = {Determinism::deterministic, ClaimSource::vendor_doc,
                "cuBLAS's default CUBLAS_ATOMICS_NOT_ALLOWED: bit-wise reproducible on one stream"},
      .run = run, .prepare = [](const Problem& p, const ExecContext& e) { return prepare(p, e, false); }},
     {.op = "symv", .name = "cublas.symv_atomics", .backend = Backend::cuda, .role = Role::vendor,
      .claim = {Determinism::nondeterministic, ClaimSource::vendor_doc,
                "cublasSetAtomicsMode(CUBLAS_ATOMICS_ALLOWED): cuBLAS documents that symv and hemv may then use atomics "
                "and results may differ from run to run"},
      .run = run, .prepare = [](const Problem& p, const ExecContext& e) { return prepare(p, e, true); }}});

}  // namespace d9m::symv
