// The CUDA executor: inputs are uploaded once per case, every trial runs on one stream between
// two CUDA events (zeroing an accumulated output is part of the op, as in the frameworks), and
// the digest and diff stats are computed on the device against the first trial's output, which
// stays there.
#include <cstdint>
#include <cstring>
#include <mutex>

#include "harness/executor.h"
#include "harness/gpu_digest.h"

namespace d9m {

namespace {

__global__ void probe_kernel() {}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { D9M_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { D9M_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
};

class CudaExecutor final : public Executor {
 public:
  std::optional<std::string> unavailable() const override {
    std::call_once(probed_, [this] {
      int n = 0;
      const cudaError_t e = cudaGetDeviceCount(&n);
      if (e != cudaSuccess) {
        cudaGetLastError();
        why_ = std::string("no device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
      } else if (n == 0) {
        why_ = "no device: the CUDA runtime sees no GPU";
      } else {
        // A GPU this build has no kernels for would fail every case: say so once instead.
        cudaFuncAttributes attr{};
        const cudaError_t k = cudaFuncGetAttributes(&attr, probe_kernel);
        if (k != cudaSuccess) {
          cudaGetLastError();
          cudaDeviceProp prop{};
          cudaGetDeviceProperties(&prop, 0);
          why_ = std::string("no kernels for this GPU (") + prop.name + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                 "): rebuild with CMAKE_CUDA_ARCHITECTURES including " + std::to_string(prop.major) + std::to_string(prop.minor);
        } else {
          // Freed device memory stays in the stream-ordered pool between trials, as in the
          // frameworks' caching allocators, instead of being unmapped at every synchronisation.
          cudaMemPool_t pool;
          if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) {
            std::uint64_t keep = UINT64_MAX;
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
          }
        }
      }
    });
    return lost_ ? lost_ : why_;
  }

  bool device_lost() const override { return lost_.has_value(); }

  CaseOutcome run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs, std::int64_t trials,
                  bool keep_first_output, const TrialCallback& after_trial) override {
    try {
      return run_trials(v, p, inputs, trials, keep_first_output, after_trial);
    } catch (const CudaError& e) {
      // After a sticky error the context is gone: the remaining GPU cases are skipped with the
      // reason, and this case is an ERROR with it.
      if (e.sticky()) lost_ = std::string("device lost earlier in this run: ") + e.what();
      throw;
    }
  }

  CaseOutcome run_trials(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs, std::int64_t trials,
                         bool keep_first_output, const TrialCallback& after_trial) {
    D9M_CUDA_CHECK(cudaSetDevice(0));
    CaseOutcome outcome;
    Stream stream;
    std::vector<DeviceBuffer> device_inputs;
    const ExecContext exec{nullptr, stream.s};
    KernelArgs args{p, {}, nullptr, exec};
    for (const auto& t : inputs) {
      device_inputs.emplace_back(std::max<std::size_t>(t.desc().bytes(), 1), stream.s);
      D9M_CUDA_CHECK(cudaMemcpyAsync(device_inputs.back().get(), t.data(), t.desc().bytes(), cudaMemcpyHostToDevice, stream.s));
      args.inputs.push_back(device_inputs.back().get());
    }
    Prepared prepared;
    if (v.prepare) prepared = v.prepare(p, exec);  // may throw Unsupported
    args.state = prepared.state.get();
    outcome.claim = prepared.claim;

    const std::size_t bytes = p.output.bytes();
    DeviceBuffer first(std::max<std::size_t>(bytes, 1), stream.s), current(std::max<std::size_t>(bytes, 1), stream.s);
    Event start, stop;
    GpuDigester digester(stream.s);
    // One untimed warm-up: lazy module loading and library set-up are not the op's cost.
    args.output = first.get();
    v.run(args);
    D9M_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    for (std::int64_t t = 0; t < trials; ++t) {
      void* out = t == 0 ? first.get() : current.get();
      // Poisoned so a variant that forgets to initialise its output cannot inherit last trial's.
      D9M_CUDA_CHECK(cudaMemsetAsync(out, 0xA5, bytes, stream.s));
      args.output = out;
      D9M_CUDA_CHECK(cudaEventRecord(start.e, stream.s));
      v.run(args);
      D9M_CUDA_CHECK(cudaEventRecord(stop.e, stream.s));
      D9M_CUDA_CHECK(cudaEventSynchronize(stop.e));
      float ms = 0;
      D9M_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
      TrialResult r;
      r.elapsed_ns = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
      r.digest = digester.digest(out, bytes).hex();
      if (t > 0 && r.digest != outcome.trials.front().digest)
        r.diff = digester.diff(p.output.dtype, first.get(), current.get(), p.output.numel());
      outcome.trials.push_back(std::move(r));
      if (after_trial && !after_trial(t + 1, trials)) break;
    }
    if (keep_first_output) {
      HostTensor host(p.output);
      D9M_CUDA_CHECK(cudaMemcpyAsync(host.data(), first.get(), bytes, cudaMemcpyDeviceToHost, stream.s));
      D9M_CUDA_CHECK(cudaStreamSynchronize(stream.s));
      outcome.first_output.emplace(std::move(host));
    }
    D9M_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    return outcome;
  }

 private:
  mutable std::once_flag probed_;
  mutable std::optional<std::string> why_;
  std::optional<std::string> lost_;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor() { return std::make_unique<CudaExecutor>(); }

}  // namespace d9m
