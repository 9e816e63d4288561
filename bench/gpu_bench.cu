// GPU figures (each skips without a device, so this binary also runs on CPU-only machines):
//   BM_GpuStreamRead/<bytes>        a coalesced streaming read of a device buffer: the limit
//   BM_GpuDigestV1/<bytes>          d9m-digest-v1 of the same buffer on the device
//   BM_GpuTrial_RawOp/<op>          the op's kernels alone, timed with CUDA events
//   BM_GpuTrial_Harness/<op>        the same op through the CUDA executor's trial loop
//   BM_GpuCostOfDeterminism/<op>    cuda.ordered and cuda.atomic interleaved A/B, ratio as a counter
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "harness/catalog.h"
#include "harness/executor.h"
#include "harness/gpu_digest.h"
#include "harness/inputs.h"
#include "kernels/common/cuda_check.h"

namespace {

bool skip_without_gpu(benchmark::State& state) {
  static const auto why = d9m::make_cuda_executor()->unavailable();
  if (why) state.SkipWithError(why->c_str());
  return why.has_value();
}

__global__ void stream_read_kernel(const ulonglong2* p, std::size_t n, unsigned long long* sink) {
  unsigned long long acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const ulonglong2 v = p[i];
    acc += v.x ^ v.y;
  }
  if (acc == 0x5eed) *sink = acc;  // keeps the loads; practically never written
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) {
    D9M_CUDA_CHECK(cudaMalloc(&p, bytes));
    D9M_CUDA_CHECK(cudaMemset(p, 0x5a, bytes));
  }
  ~DeviceBuffer() { cudaFree(p); }
};

void BM_GpuStreamRead(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  DeviceBuffer buf(bytes), sink(8);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (auto _ : state) {
    stream_read_kernel<<<sms * 8, 512>>>(static_cast<const ulonglong2*>(buf.p), bytes / 16, static_cast<unsigned long long*>(sink.p));
    D9M_CUDA_CHECK(cudaDeviceSynchronize());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GpuStreamRead)->RangeMultiplier(4)->Range(1 << 20, 256 << 20)->UseRealTime();

void BM_GpuDigestV1(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  DeviceBuffer buf(bytes);
  d9m::GpuDigester digester(nullptr);
  for (auto _ : state) benchmark::DoNotOptimize(digester.digest(buf.p, bytes));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GpuDigestV1)->RangeMultiplier(4)->Range(1 << 20, 256 << 20)->UseRealTime();

// The first default-catalogue config of each op with a CUDA atomic/ordered pair.
struct OpCase {
  d9m::CatalogConfig cc;
  std::vector<d9m::HostTensor> inputs;
};

const std::vector<std::string>& bench_ops() {
  static const std::vector<std::string> ops = {"bias_add_grad", "conv2d_bwd_filter", "maxpool2d_bwd", "resize_bilinear_grad",
                                               "scatter_add", "unsorted_segment_sum", "crop_and_resize_grad_image"};
  return ops;
}

OpCase op_case(const std::string& op) {
  const d9m::Catalog cat = d9m::default_catalog(d9m::Registry::global());
  for (const auto& cc : cat.configs)
    if (cc.op->name == op) return {cc, d9m::make_inputs(*cc.op, cc.problem, cc.seed)};
  throw std::runtime_error("no config for " + op);
}

// Raw op: device inputs and output prepared once, then the op's kernels between two events.
double raw_op_ms(const d9m::VariantDef& v, const OpCase& c, int reps) {
  cudaStream_t s;
  D9M_CUDA_CHECK(cudaStreamCreate(&s));
  std::vector<DeviceBuffer> in;
  const d9m::ExecContext exec{nullptr, s};
  d9m::KernelArgs args{c.cc.problem, {}, nullptr, exec};
  for (const auto& t : c.inputs) {
    in.emplace_back(std::max<std::size_t>(t.desc().bytes(), 1));
    D9M_CUDA_CHECK(cudaMemcpy(in.back().p, t.data(), t.desc().bytes(), cudaMemcpyHostToDevice));
    args.inputs.push_back(in.back().p);
  }
  DeviceBuffer out(std::max<std::size_t>(c.cc.problem.output.bytes(), 1));
  args.output = out.p;
  v.run(args);  // warm-up
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, s);
  for (int i = 0; i < reps; ++i) v.run(args);
  cudaEventRecord(b, s);
  D9M_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  return ms / reps;
}

void BM_GpuTrial_RawOp(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const OpCase c = op_case(bench_ops()[static_cast<std::size_t>(state.range(0))]);
  const auto* v = d9m::Registry::global().find_variant(c.cc.op->name, "cuda.ordered");
  for (auto _ : state) state.SetIterationTime(raw_op_ms(*v, c, 20) / 1e3);
  state.SetLabel(c.cc.op->name + "/" + c.cc.name);
}

void BM_GpuTrial_Harness(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const OpCase c = op_case(bench_ops()[static_cast<std::size_t>(state.range(0))]);
  const auto* v = d9m::Registry::global().find_variant(c.cc.op->name, "cuda.ordered");
  auto ex = d9m::make_cuda_executor();
  constexpr int kTrials = 20;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(ex->run(*v, c.cc.problem, c.inputs, kTrials, false, nullptr));
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kTrials);
  }
  state.SetLabel(c.cc.op->name + "/" + c.cc.name + " (per trial, incl. upload and set-up per call)");
}

// Cost of determinism: ordered and atomic interleaved in every iteration (A/B), so drift in
// clocks or load hits both alike; the ratio of the summed times is the counter.
void BM_GpuCostOfDeterminism(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const OpCase c = op_case(bench_ops()[static_cast<std::size_t>(state.range(0))]);
  const auto* ordered = d9m::Registry::global().find_variant(c.cc.op->name, "cuda.ordered");
  const auto* atomic = d9m::Registry::global().find_variant(c.cc.op->name, "cuda.atomic");
  double t_ordered = 0, t_atomic = 0;
  for (auto _ : state) {
    t_ordered += raw_op_ms(*ordered, c, 10);
    t_atomic += raw_op_ms(*atomic, c, 10);
  }
  state.counters["ordered_over_atomic"] = t_ordered / t_atomic;
  state.SetLabel(c.cc.op->name + "/" + c.cc.name);
}

void op_args(benchmark::internal::Benchmark* b) {
  for (std::size_t i = 0; i < bench_ops().size(); ++i) b->Arg(static_cast<std::int64_t>(i));
}
BENCHMARK(BM_GpuTrial_RawOp)->Apply(op_args)->UseManualTime();
BENCHMARK(BM_GpuTrial_Harness)->Apply(op_args)->UseManualTime();
BENCHMARK(BM_GpuCostOfDeterminism)->Apply(op_args)->Iterations(5);

}  // namespace
