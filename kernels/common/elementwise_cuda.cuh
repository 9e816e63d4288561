// One thread per output element, for ops that write each output once.
#pragma once
#include <cstddef>

#include "kernels/common/cuda_check.h"
#include "kernels/registry.h"

namespace d9m::cuda {

template <class F>
__global__ void for_each_index_kernel(std::size_t n, F f) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) f(i);
}

template <class F>
void for_each_index(const KernelArgs& a, std::size_t n, F f) {
  if (n == 0) return;
  for_each_index_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(a.exec.stream)>>>(n, f);
  D9M_CUDA_CHECK_LAUNCH();
}

inline cudaStream_t stream_of(const KernelArgs& a) { return static_cast<cudaStream_t>(a.exec.stream); }

inline void zero_output(const KernelArgs& a) {
  D9M_CUDA_CHECK(cudaMemsetAsync(a.output, 0, a.problem.output.bytes(), stream_of(a)));
}

}  // namespace d9m::cuda
