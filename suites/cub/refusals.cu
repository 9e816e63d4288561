// The determinism levels CCCL refuses at compile time for float sums, one per D9M_REFUSAL: the
// reduce family registers these as UNSUPPORTED variants quoting the assertion
// (kernels/reduce/reduce_cub.cu). refusals_test.cmake compiles each and expects that very
// assertion: when a newer CCCL accepts one, the test fails, and the variant should run instead.
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/__execution/determinism.h>
#include <cuda/__execution/require.h>

namespace det = ::cuda::execution::determinism;

cudaError_t attempt(float* in, float* out, int* offsets) {
#if D9M_REFUSAL == 1
  (void)offsets;
  return cub::DeviceScan::ExclusiveSum(in, out, 8, ::cuda::execution::require(det::run_to_run));
#elif D9M_REFUSAL == 2
  (void)offsets;
  return cub::DeviceScan::ExclusiveSum(in, out, 8, ::cuda::execution::require(det::gpu_to_gpu));
#elif D9M_REFUSAL == 3
  return cub::DeviceSegmentedReduce::Sum(in, out, 2, offsets, offsets + 1, ::cuda::execution::require(det::gpu_to_gpu));
#else
#error "D9M_REFUSAL names the refusal to attempt: 1, 2 or 3"
#endif
}
