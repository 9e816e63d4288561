// The determinism levels CCCL refuses at compile time for float sums, one per D9M_REFUSAL: the
// reduce family registers these as UNSUPPORTED variants quoting the assertion
// (kernels/reduce/reduce_cub.cu). refusals_test.cmake compiles each and expects that very
// assertion: when a newer CCCL accepts one, the test fails, and the variant should run instead.
// Refusal 4 is not a level but a missing overload: InclusiveSum has no environment form in the
// pinned CCCL, which is why cumsum's environment variants call ExclusiveSum over N+1 items.
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
#elif D9M_REFUSAL == 4
  (void)offsets;
  return cub::DeviceScan::InclusiveSum(in, out, 8, ::cuda::execution::require(det::not_guaranteed));
#else
#error "D9M_REFUSAL names the refusal to attempt: 1, 2, 3 or 4"
#endif
}
