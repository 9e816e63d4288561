// cuda.ordered in waves (kernels/common/accumulate_cuda.cuh): with a wave budget far below the
// contributions, the device sort-and-sum in several waves still gives the host serial sum's bits.
// The catalogue's configs fit one wave at the real budget, so only this test makes waves. It also
// runs the one-wave path sized from the plan's bound (no read-back), with exact and loose bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness/exec/executor.h"
#include "kernels/common/accumulate_cuda.cuh"

namespace d9m {
namespace {

// Sources emit 0 to 6 contributions each (some sources none, so a wave may be empty) into few
// targets, in an order unlike their targets', with values whose float sums depend on the order.
__host__ __device__ inline std::size_t target_of(std::size_t s, std::size_t k) { return (s * 31 + k * 17) % 97; }
__host__ __device__ inline float value_of(std::size_t s, std::size_t k) {
  return 1.0f / static_cast<float>(1 + ((s * 7919 + k) % 1013));
}
struct UnevenScatter {
  template <class Emit>
  __device__ void operator()(std::size_t s, Emit& emit) const {
    for (std::size_t k = 0; k < s % 7; ++k) emit(target_of(s, k), value_of(s, k));
  }
};

// UnevenScatter's sources and values, into 128 targets.
struct PowerOfTwoScatter {
  static constexpr std::size_t kTargets = 128;
  template <class Emit>
  __device__ void operator()(std::size_t s, Emit& emit) const {
    for (std::size_t k = 0; k < s % 7; ++k) emit((s * 31 + k * 17) % kTargets, value_of(s, k));
  }
};

TEST(CudaOrderedWaves, AnyWaveBudgetGivesTheHostSerialBits) {
  if (const auto why = make_cuda_executor()->unavailable()) GTEST_SKIP() << *why;
  const std::size_t sources = 20000, targets = 97;
  // The serial reference on the host: every contribution added in source, then emission, order.
  std::vector<float> serial(targets, 0.0f);
  for (std::size_t s = 0; s < sources; ++s)
    for (std::size_t k = 0; k < s % 7; ++k) serial[target_of(s, k)] += value_of(s, k);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, targets * sizeof(float)), cudaSuccess);
  for (std::uint64_t budget : {std::uint64_t{1}, std::uint64_t{5}, std::uint64_t{1000}, accumulate::cuda::kWaveContributions}) {
    ASSERT_EQ(cudaMemsetAsync(out, 0, targets * sizeof(float), stream), cudaSuccess);
    accumulate::cuda::ordered(stream, sources, targets, out, UnevenScatter{}, 0, budget);
    std::vector<float> got(targets);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), out, targets * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(std::memcmp(got.data(), serial.data(), targets * sizeof(float)), 0) << "budget " << budget;
  }
  std::uint64_t emitted = 0;
  for (std::size_t s = 0; s < sources; ++s) emitted += s % 7;
  // With the plan's bound stated (within the budget), one wave sized from the bound and padded
  // past the emitted pairs, with no read-back: the same bits, whether the bound is exact or loose.
  for (std::uint64_t bound : {emitted, emitted + 1, emitted + 12345, 2 * emitted}) {
    ASSERT_EQ(cudaMemsetAsync(out, 0, targets * sizeof(float), stream), cudaSuccess);
    accumulate::cuda::ordered(stream, sources, targets, out, UnevenScatter{}, bound);
    std::vector<float> got(targets);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), out, targets * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(std::memcmp(got.data(), serial.data(), targets * sizeof(float)), 0) << "bound " << bound;
  }
  // Targets a power of two: the padding key (= targets) needs the sort's next bit.
  {
    constexpr std::size_t kTargets = PowerOfTwoScatter::kTargets;
    std::vector<float> serial128(kTargets, 0.0f);
    for (std::size_t s = 0; s < sources; ++s)
      for (std::size_t k = 0; k < s % 7; ++k) serial128[(s * 31 + k * 17) % kTargets] += value_of(s, k);
    float* out128 = nullptr;
    ASSERT_EQ(cudaMalloc(&out128, kTargets * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(out128, 0, kTargets * sizeof(float), stream), cudaSuccess);
    accumulate::cuda::ordered(stream, sources, kTargets, out128, PowerOfTwoScatter{}, emitted + 3);
    std::vector<float> got(kTargets);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), out128, kTargets * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaFree(out128);
    EXPECT_EQ(std::memcmp(got.data(), serial128.data(), kTargets * sizeof(float)), 0) << "128 targets";
  }
  // A padded wave of nothing but padding (source 0 emits nothing) leaves the output as it was.
  {
    const std::vector<float> before(targets, 2.5f);
    ASSERT_EQ(cudaMemcpyAsync(out, before.data(), targets * sizeof(float), cudaMemcpyHostToDevice, stream), cudaSuccess);
    accumulate::cuda::ordered(stream, 1, targets, out, UnevenScatter{}, 5);
    std::vector<float> got(targets);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), out, targets * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(got, before);
  }
  EXPECT_THROW(accumulate::cuda::ordered(stream, sources, targets, out, UnevenScatter{}, emitted - 1, 1000), std::logic_error);
  cudaFree(out);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace d9m
