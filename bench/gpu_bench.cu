// GPU figures (each skips without a device, so this binary also runs on CPU-only machines):
//   BM_GpuStreamRead/<bytes>          a coalesced streaming read of a device buffer: the limit
//   BM_GpuDigestV1/<bytes>            d9m-digest-v1 of the same buffer on the device
//   BM_GpuTrialOverhead/<case>        per trial, the CUDA executor's trial loop against the op's
//                                     kernels alone, interleaved; counters raw_us, harness_us and
//                                     overhead_pct (the target: at most 5% for outputs >= 1 MiB)
//   BM_GpuCostOfDeterminism/<case>    cuda.atomic and every deterministic CUDA variant interleaved,
//                                     each one's time over atomic's as a counter
// The cases are one config per op family with an output of 1 MiB or more (bench_catalog.h).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_catalog.h"
#include "harness/core/catalog.h"
#include "harness/exec/executor.h"
#include "harness/core/gpu_digest.h"
#include "harness/core/inputs.h"
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

struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(std::size_t bytes) {
    D9M_CUDA_CHECK(cudaMalloc(&p, bytes));
    D9M_CUDA_CHECK(cudaMemset(p, 0x5a, bytes));
  }
  ~DeviceMemory() { cudaFree(p); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

void BM_GpuStreamRead(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  DeviceMemory buf(bytes), sink(8);
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
  DeviceMemory buf(bytes);
  d9m::GpuDigester digester(nullptr);
  for (auto _ : state) benchmark::DoNotOptimize(digester.digest(buf.p, bytes));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GpuDigestV1)->RangeMultiplier(4)->Range(1 << 20, 256 << 20)->UseRealTime();

using d9m::bench::bench_catalog;
using d9m::bench::case_args;
using d9m::bench::case_label;

// A variant ready to run on one stream: inputs uploaded, prepare() done, output allocated, one
// warm-up run behind it -- what the executor does once per case, outside the trials.
class RawOp {
 public:
  RawOp(const d9m::VariantDef& v, const d9m::CatalogConfig& cc, const std::vector<d9m::HostTensor>& inputs)
      : v_(v), exec_{nullptr, stream_}, args_{cc.problem, {}, nullptr, exec_} {
    for (const auto& t : inputs) {
      in_.emplace_back(std::max<std::size_t>(t.desc().bytes(), 1), stream_);
      D9M_CUDA_CHECK(cudaMemcpyAsync(in_.back().get(), t.data(), t.desc().bytes(), cudaMemcpyHostToDevice, stream_));
      args_.inputs.push_back(in_.back().get());
    }
    if (v.prepare) prepared_ = v.prepare(cc.problem, exec_);
    args_.state = prepared_.state.get();
    out_ = d9m::DeviceBuffer(std::max<std::size_t>(cc.problem.output.bytes(), 1), stream_);
    args_.output = out_.get();
    v_.run(args_);
    D9M_CUDA_CHECK(cudaStreamSynchronize(stream_));
    D9M_CUDA_CHECK(cudaEventCreate(&a_));
    D9M_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~RawOp() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  RawOp(const RawOp&) = delete;
  RawOp& operator=(const RawOp&) = delete;

  // Mean time of one run over `reps` back-to-back runs, from CUDA events (microseconds).
  double us_per_run(int reps) {
    D9M_CUDA_CHECK(cudaEventRecord(a_, stream_));
    for (int i = 0; i < reps; ++i) v_.run(args_);
    D9M_CUDA_CHECK(cudaEventRecord(b_, stream_));
    D9M_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    D9M_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return static_cast<double>(ms) * 1e3 / reps;
  }

 private:
  struct OwnedStream {
    cudaStream_t s = nullptr;
    OwnedStream() { D9M_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
    ~OwnedStream() { cudaStreamDestroy(s); }
    operator cudaStream_t() const { return s; }
  };
  const d9m::VariantDef& v_;
  OwnedStream stream_;
  d9m::ExecContext exec_;
  d9m::KernelArgs args_;
  std::vector<d9m::DeviceBuffer> in_;
  d9m::Prepared prepared_;
  d9m::DeviceBuffer out_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

// Per trial in the executor's steady state: from the end of trial 1 to the end of the last, so
// the once-per-case set-up (upload, prepare, warm-up) is left out as it is from the raw figure.
double harness_us_per_trial(d9m::Executor& ex, const d9m::VariantDef& v, const d9m::CatalogConfig& cc,
                            const std::vector<d9m::HostTensor>& inputs, std::int64_t trials) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point after_first, after_last;
  const auto outcome = ex.run(v, cc.problem, inputs, trials, false, [&](std::int64_t done, std::int64_t total) {
    if (done == 1) after_first = Clock::now();
    if (done == total) after_last = Clock::now();
    return true;
  });
  benchmark::DoNotOptimize(outcome);
  return std::chrono::duration<double, std::micro>(after_last - after_first).count() / static_cast<double>(trials - 1);
}

void BM_GpuTrialOverhead(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto& cc = bench_catalog().configs.at(static_cast<std::size_t>(state.range(0)));
  const auto inputs = d9m::make_inputs(*cc.op, cc.problem, cc.seed);
  const auto* v = d9m::Registry::global().find_variant(cc.op->name, "cuda.ordered");
  auto ex = d9m::make_cuda_executor();
  RawOp raw(*v, cc, inputs);
  double raw_us = 0, harness_us = 0;
  for (auto _ : state) {
    const double r = raw.us_per_run(50);
    const double h = harness_us_per_trial(*ex, *v, cc, inputs, 200);
    raw_us += r;
    harness_us += h;
    state.SetIterationTime(h / 1e6);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["raw_us"] = raw_us / n;
  state.counters["harness_us"] = harness_us / n;
  state.counters["overhead_pct"] = 100.0 * (harness_us - raw_us) / raw_us;
  state.SetLabel(case_label(cc));
}

// Cost of determinism: cuda.atomic and every deterministic CUDA variant of the op (cuda.ordered,
// cuda.gather, cuda.fixed_point where it has them) interleaved in every iteration (A/B/C...), so
// drift in clocks or load hits all alike; per variant the ratio of the summed times is a counter
// (`<variant>/atomic`), and `best/atomic` is the fastest one's.
void BM_GpuCostOfDeterminism(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto& cc = bench_catalog().configs.at(static_cast<std::size_t>(state.range(0)));
  const auto* atomic_variant = d9m::Registry::global().find_variant(cc.op->name, "cuda.atomic");
  if (!atomic_variant) {
    state.SkipWithError((cc.op->name + " has no cuda.atomic").c_str());
    return;
  }
  const auto inputs = d9m::make_inputs(*cc.op, cc.problem, cc.seed);
  RawOp atomic(*atomic_variant, cc, inputs);
  std::vector<std::unique_ptr<RawOp>> det;
  const auto variants = d9m::bench::deterministic_variants(cc.op->name, d9m::Backend::cuda);
  for (const auto* v : variants) det.push_back(std::make_unique<RawOp>(*v, cc, inputs));
  double t_atomic = 0;
  std::vector<double> t_det(det.size(), 0.0);
  for (auto _ : state) {
    t_atomic += atomic.us_per_run(20);
    for (std::size_t i = 0; i < det.size(); ++i) t_det[i] += det[i]->us_per_run(20);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["atomic_us"] = t_atomic / n;
  d9m::bench::set_cost_counters(state, variants, t_det, t_atomic);
  state.SetLabel(case_label(cc));
}

BENCHMARK(BM_GpuTrialOverhead)->Apply(case_args)->UseManualTime()->Iterations(5);
BENCHMARK(BM_GpuCostOfDeterminism)->Apply(case_args)->Iterations(10);

}  // namespace
