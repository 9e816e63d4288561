// GPU figures (each skips without a device, so this binary also runs on CPU-only machines):
//   BM_GpuStreamRead/<bytes>          a coalesced streaming read of a device buffer: the limit
//   BM_GpuDigestV1/<bytes>            d9m-digest-v1 of the same buffer on the device
//   BM_GpuTrialOverhead/<case>        per trial, the CUDA executor's trial loop against the op's
//                                     kernels alone, interleaved; counters raw_us, harness_us and
//                                     overhead_pct (the target: at most 5% for outputs >= 1 MiB)
//   BM_GpuCostOfDeterminism/<case>    cuda.ordered and cuda.atomic interleaved A/B, ratio as a counter
// The cases are one config per op family with an output of 1 MiB or more (kBenchCatalog).
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

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

// One config per op family with an output of 1 MiB or more (the default catalogue's configs are
// smaller: there the per-trial round trip, not the op, is what a trial costs).
constexpr const char* kBenchCatalog = R"({"schema": "d9m.catalog/1", "configs": [
 {"op": "bias_add", "name": "bench_8MiB", "params": {"n": 32, "h": 32, "w": 32, "c": 64}},
 {"op": "conv2d_bwd_data", "name": "bench_1MiB", "params": {"n": 8, "h": 32, "w": 32, "ci": 32, "co": 32, "kh": 3, "kw": 3}},
 {"op": "maxpool2d_bwd", "name": "bench_2MiB", "params": {"n": 8, "h": 64, "w": 64, "c": 16, "ksize_h": 3, "ksize_w": 3,
                                                          "stride_h": 1, "stride_w": 1, "padding": "SAME"}},
 {"op": "resize_bilinear_grad", "name": "bench_2MiB", "params": {"n": 8, "h": 64, "w": 64, "c": 16, "out_h": 128, "out_w": 128}},
 {"op": "scatter_add", "name": "bench_2MiB", "params": {"rows": 65536, "depth": 8, "updates": 65536}},
 {"op": "unsorted_segment_sum", "name": "bench_2MiB", "params": {"rows": 262144, "depth": 8, "num_segments": 65536}},
 {"op": "crop_and_resize_grad_image", "name": "bench_4MiB", "params": {"batch": 4, "h": 128, "w": 128, "c": 16, "boxes": 64,
                                                                       "crop_h": 17, "crop_w": 17}}]})";

const d9m::Catalog& bench_catalog() {
  static const d9m::Catalog cat = d9m::parse_catalog(kBenchCatalog, "<gpu bench>", d9m::Registry::global());
  return cat;
}

std::string case_label(const d9m::CatalogConfig& cc) {
  return cc.op->name + "/" + cc.name + " (" + std::to_string(cc.problem.output.bytes() >> 10) + " KiB out)";
}

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

// Cost of determinism: ordered and atomic interleaved in every iteration (A/B), so drift in
// clocks or load hits both alike; the ratio of the summed times is the counter.
void BM_GpuCostOfDeterminism(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto& cc = bench_catalog().configs.at(static_cast<std::size_t>(state.range(0)));
  const auto inputs = d9m::make_inputs(*cc.op, cc.problem, cc.seed);
  RawOp ordered(*d9m::Registry::global().find_variant(cc.op->name, "cuda.ordered"), cc, inputs);
  RawOp atomic(*d9m::Registry::global().find_variant(cc.op->name, "cuda.atomic"), cc, inputs);
  double t_ordered = 0, t_atomic = 0;
  for (auto _ : state) {
    t_ordered += ordered.us_per_run(20);
    t_atomic += atomic.us_per_run(20);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["ordered_us"] = t_ordered / n;
  state.counters["atomic_us"] = t_atomic / n;
  state.counters["ordered_over_atomic"] = t_ordered / t_atomic;
  state.SetLabel(case_label(cc));
}

// One argument per config of kBenchCatalog, counted in its text: benchmarks register before the
// op registry is complete, so the catalogue cannot be parsed yet.
void case_args(benchmark::internal::Benchmark* b) {
  const std::string text = kBenchCatalog;
  std::int64_t configs = 0;
  for (std::size_t at = text.find("\"op\":"); at != std::string::npos; at = text.find("\"op\":", at + 1)) ++configs;
  for (std::int64_t i = 0; i < configs; ++i) b->Arg(i);
}
BENCHMARK(BM_GpuTrialOverhead)->Apply(case_args)->UseManualTime()->Iterations(5);
BENCHMARK(BM_GpuCostOfDeterminism)->Apply(case_args)->Iterations(10);

}  // namespace
