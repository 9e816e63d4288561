// symv: y[N] = A x for a symmetric A[N,N] of which only the lower triangle is read (BLAS symv,
// row-major, uplo = lower), at f32 and f64. The reference adds y_i's N products in ascending j.
// It is here for cuBLAS's one documented switch between reproducible and not:
// cublasSetAtomicsMode(CUBLAS_ATOMICS_ALLOWED) lets symv (and hemv) use atomics.
#pragma once
#include <cstdint>

#include "kernels/common/hd.h"

namespace d9m::symv {

struct Geometry {
  std::int64_t n = 0;
};

// A[i,j] of the symmetric matrix, read from the lower triangle.
template <class T>
D9M_HD inline T at(const T* a, std::int64_t n, std::int64_t i, std::int64_t j) {
  return i >= j ? a[i * n + j] : a[j * n + i];
}

template <class T>
D9M_HD inline T row(const T* a, const T* x, std::int64_t n, std::int64_t i) {
  T acc = 0;
  for (std::int64_t j = 0; j < n; ++j) acc = acc + at(a, n, i, j) * x[j];
  return acc;
}

}  // namespace d9m::symv
