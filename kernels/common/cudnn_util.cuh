// cuDNN helpers with device code: everything in cudnn_util.h, and a layout transpose
// (deterministic: each output element is written once).
#pragma once
#include "kernels/common/cudnn_util.h"

namespace d9m::cudnn {

// out = in with its 4 axes permuted: out axis j is in axis perm[j]. dims are in's extents. T is
// moved as bits (the storage types of every float dtype, or their bits as unsigned integers).
template <class T>
__global__ void permute4_kernel(const T* in, T* out, long long d0, long long d1, long long d2, long long d3, int p0, int p1,
                                int p2, int p3) {
  const long long n = d0 * d1 * d2 * d3;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const long long dims[4] = {d0, d1, d2, d3};
  const long long idx[4] = {i / (d1 * d2 * d3), (i / (d2 * d3)) % d1, (i / d3) % d2, i % d3};
  const int perm[4] = {p0, p1, p2, p3};
  long long o = 0;
  for (int j = 0; j < 4; ++j) o = o * dims[perm[j]] + idx[perm[j]];
  out[o] = in[i];
}

template <class T>
void permute4(cudaStream_t s, const T* in, T* out, const std::int64_t (&dims)[4], const int (&perm)[4]) {
  const std::size_t n = static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]);
  if (n == 0) return;
  permute4_kernel<T><<<blocks_for(n), 256, 0, s>>>(in, out, dims[0], dims[1], dims[2], dims[3], perm[0], perm[1], perm[2], perm[3]);
  D9M_CUDA_CHECK_LAUNCH();
}

// The same for a tensor of a float dtype, its elements moved as bits of the dtype's size.
inline void permute4(cudaStream_t s, DType t, const void* in, void* out, const std::int64_t (&dims)[4], const int (&perm)[4]) {
  switch (dtype_size(t)) {
    case 2: return permute4(s, static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(out), dims, perm);
    case 4: return permute4(s, static_cast<const std::uint32_t*>(in), static_cast<std::uint32_t*>(out), dims, perm);
    case 8: return permute4(s, static_cast<const std::uint64_t*>(in), static_cast<std::uint64_t*>(out), dims, perm);
    default: throw std::logic_error("permute4: no element type of " + std::to_string(dtype_size(t)) + " bytes");
  }
}

}  // namespace d9m::cudnn
