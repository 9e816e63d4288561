#include "kernels/common/cudnn_util.cuh"

namespace d9m::cudnn {

__global__ void permute4_kernel(const float* in, float* out, long long d0, long long d1, long long d2, long long d3,
                                int p0, int p1, int p2, int p3) {
  const long long n = d0 * d1 * d2 * d3;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const long long dims[4] = {d0, d1, d2, d3};
  long long idx[4] = {i / (d1 * d2 * d3), (i / (d2 * d3)) % d1, (i / d3) % d2, i % d3};
  const int perm[4] = {p0, p1, p2, p3};
  long long o = 0;
  for (int j = 0; j < 4; ++j) o = o * dims[perm[j]] + idx[perm[j]];
  out[o] = in[i];
}

}  // namespace d9m::cudnn
