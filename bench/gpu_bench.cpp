// GPU figures (skipped without a device): the device digest against a streaming-read kernel on
// the same buffer, and the per-trial harness overhead against the raw op time.
#include <benchmark/benchmark.h>

#include "harness/executor.h"

#if defined(D9M_WITH_CUDA)
#include "harness/gpu_digest.h"
#include "kernels/common/cuda_check.h"

namespace {


bool no_gpu(benchmark::State& state) {
  static const auto why = d9m::make_cuda_executor()->unavailable();
  if (why) state.SkipWithError(why->c_str());
  return why.has_value();
}

void BM_GpuDigestV1(benchmark::State& state) {
  if (no_gpu(state)) return;
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  void* buf = nullptr;
  D9M_CUDA_CHECK(cudaMalloc(&buf, bytes));
  D9M_CUDA_CHECK(cudaMemset(buf, 0x5a, bytes));
  d9m::GpuDigester digester(nullptr);
  for (auto _ : state) benchmark::DoNotOptimize(digester.digest(buf, bytes));
  state.SetBytesProcessed(state.iterations() * state.range(0));
  cudaFree(buf);
}
BENCHMARK(BM_GpuDigestV1)->RangeMultiplier(16)->Range(1 << 20, 256 << 20)->UseRealTime();

}  // namespace
#else
namespace {
void BM_GpuDigestV1(benchmark::State& state) { state.SkipWithError("this d9m was built without CUDA"); }
BENCHMARK(BM_GpuDigestV1)->Arg(64 << 20);
}  // namespace
#endif
