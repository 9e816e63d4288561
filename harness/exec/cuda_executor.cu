// The CUDA executor: inputs are uploaded once per case, every trial runs on one stream between
// two CUDA events (zeroing an accumulated output is part of the op, as in the frameworks), and
// the digest and diff stats are computed on the device against the first trial's output, which
// stays there. Trials are queued in batches, so the host waits once per batch, not per trial.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "harness/exec/executor.h"
#include "harness/core/gpu_digest.h"

namespace d9m {

namespace {

__global__ void probe_kernel() {}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { D9M_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { D9M_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
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

  std::string memory_name() const override { return "device memory"; }
  bool on_device() const override { return true; }
  bool digests_off_host() const override { return true; }

  // Free device memory, counting what the stream-ordered pool keeps reserved but unused (freed
  // buffers stay there between trials, see unavailable()).
  std::optional<std::uint64_t> memory_free() const override {
    if (unavailable()) return std::nullopt;
    std::size_t free = 0, total = 0;
    if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    std::uint64_t pooled = 0;
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) {
      std::uint64_t reserved = 0, used = 0;
      if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
          cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess && reserved > used)
        pooled = reserved - used;
    }
    cudaGetLastError();
    return static_cast<std::uint64_t>(free) + pooled;
  }

  // The inputs, the first trial's output (kept for the diffs) and the current one, on the device.
  std::uint64_t memory_held(const Problem& p) const override {
    std::uint64_t bytes = 2 * static_cast<std::uint64_t>(p.output.bytes());
    for (const auto& d : p.inputs) bytes += d.bytes();
    return bytes;
  }

  CaseOutcome run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs, std::int64_t trials,
                  bool keep_first_output, const TrialCallback& after_trial) override {
    return noting_loss([&] { return run_trials(v, p, inputs, trials, keep_first_output, after_trial); });
  }

  HostTensor run_once(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                      OnceChoice* choice = nullptr) override {
    return noting_loss([&] {
      D9M_CUDA_CHECK(cudaSetDevice(0));
      Stream stream;
      std::vector<DeviceBuffer> device_inputs;
      const ExecContext exec{nullptr, stream.s};
      KernelArgs args{p, {}, nullptr, exec};
      upload(inputs, stream.s, device_inputs, args);
      if (choice) {
        args.choice = &choice->made;
        if (!choice->replay.empty()) args.replay = &choice->replay;
      }
      Prepared prepared;
      if (v.prepare) prepared = v.prepare(p, exec);
      args.state = prepared.state.get();
      const std::size_t bytes = p.output.bytes();
      DeviceBuffer out(std::max<std::size_t>(bytes, 1), stream.s);
      D9M_CUDA_CHECK(cudaMemsetAsync(out.get(), output_poison(0), bytes, stream.s));
      args.output = out.get();
      v.run(args);
      HostTensor host(p.output);
      D9M_CUDA_CHECK(cudaMemcpyAsync(host.data(), out.get(), bytes, cudaMemcpyDeviceToHost, stream.s));
      D9M_CUDA_CHECK(cudaStreamSynchronize(stream.s));
      return host;
    });
  }

  // After a sticky error the context is gone: the remaining GPU cases are skipped with the
  // reason, and this case is an ERROR with it.
  template <class F>
  auto noting_loss(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const CudaError& e) {
      if (e.sticky()) lost_ = std::string("device lost earlier in this run: ") + e.what();
      throw;
    }
  }

  static void upload(const std::vector<HostTensor>& inputs, cudaStream_t s, std::vector<DeviceBuffer>& device_inputs,
                     KernelArgs& args) {
    device_inputs.reserve(inputs.size());
    for (const auto& t : inputs) {
      device_inputs.emplace_back(std::max<std::size_t>(t.desc().bytes(), 1), s);
      D9M_CUDA_CHECK(cudaMemcpyAsync(device_inputs.back().get(), t.data(), t.desc().bytes(), cudaMemcpyHostToDevice, s));
      args.inputs.push_back(device_inputs.back().get());
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
    upload(inputs, stream.s, device_inputs, args);
    // What an autotuning variant chose, per trial of a batch: run() is called on the host in
    // trial order, so the choice is known when the trial is queued.
    std::string choice;
    args.choice = &choice;
    Prepared prepared;
    if (v.prepare) prepared = v.prepare(p, exec);  // may throw Unsupported
    args.state = prepared.state.get();
    outcome.claim = prepared.claim;

    const std::size_t bytes = p.output.bytes();
    DeviceBuffer first(std::max<std::size_t>(bytes, 1), stream.s), current(std::max<std::size_t>(bytes, 1), stream.s);
    GpuDigester digester(stream.s);
    // One untimed warm-up: lazy module loading and library set-up are not the op's cost.
    args.output = first.get();
    v.run(args);
    D9M_CUDA_CHECK(cudaStreamSynchronize(stream.s));

    // Trials go in batches queued back to back on the stream -- poison, op between its events,
    // digest, and the diff against the first trial (a no-op on the device when the digests are
    // equal) -- and the host waits once per batch for every digest and diff of it. A batch is
    // sized to about kBatchSeconds of the last batch's pace, so a slow op still reports every
    // trial promptly (the worker's watchdog and progress) while a fast one is not dominated by
    // one round trip per trial.
    // (The sizing trusts the pace to hold within a case -- same op, inputs and stream. Starving
    // the watchdog, 300 s by default and reset per trial, would take a batch of 64 trials that
    // are each some 6000 times slower than the ones measured just before.)
    constexpr std::int64_t kMaxBatch = 64;
    std::vector<std::string> choices(kMaxBatch);
    constexpr double kBatchSeconds = 0.05;
    std::vector<Event> starts(kMaxBatch), stops(kMaxBatch);
    DeviceBuffer digests((kMaxBatch + 1) * 16, stream.s), diffs(kMaxBatch * sizeof(GpuDiffSlot), stream.s);
    std::uint64_t* first_digest = digests.get<std::uint64_t>() + 2 * kMaxBatch;  // trial 0's, kept
    PinnedHostBuffer host_digest_buffer((kMaxBatch + 1) * 16), host_diff_buffer(kMaxBatch * sizeof(GpuDiffSlot));
    auto* host_digests = host_digest_buffer.get<std::uint64_t>();
    auto* host_diffs = host_diff_buffer.get<GpuDiffSlot>();
    std::int64_t next_batch = 1;
    bool stopped = false;
    for (std::int64_t t0 = 0, batch = 0; t0 < trials && !stopped; t0 += batch) {
      batch = std::min(next_batch, trials - t0);
      const auto wall0 = std::chrono::steady_clock::now();
      D9M_CUDA_CHECK(cudaMemsetAsync(diffs.get(), 0, static_cast<std::size_t>(batch) * sizeof(GpuDiffSlot), stream.s));
      for (std::int64_t j = 0; j < batch; ++j) {
        const std::int64_t t = t0 + j;
        void* out = t == 0 ? first.get() : current.get();
        // Poisoned so a variant that forgets to initialise its output cannot inherit last trial's.
        D9M_CUDA_CHECK(cudaMemsetAsync(out, output_poison(t), bytes, stream.s));
        args.output = out;
        choice.clear();
        D9M_CUDA_CHECK(cudaEventRecord(starts[j].e, stream.s));
        v.run(args);
        choices[static_cast<std::size_t>(j)] = choice;
        D9M_CUDA_CHECK(cudaEventRecord(stops[j].e, stream.s));
        std::uint64_t* slot = t == 0 ? first_digest : digests.get<std::uint64_t>() + 2 * j;
        digester.enqueue_digest(out, bytes, slot);
        if (t > 0)
          digester.enqueue_diff_if_different(p.output.dtype, first.get(), current.get(), p.output.numel(), first_digest,
                                             slot, diffs.get<GpuDiffSlot>() + j);
      }
      D9M_CUDA_CHECK(cudaMemcpyAsync(host_digests, digests.get(), host_digest_buffer.bytes(), cudaMemcpyDeviceToHost, stream.s));
      D9M_CUDA_CHECK(cudaMemcpyAsync(host_diffs, diffs.get(), static_cast<std::size_t>(batch) * sizeof(GpuDiffSlot),
                                     cudaMemcpyDeviceToHost, stream.s));
      D9M_CUDA_CHECK(cudaStreamSynchronize(stream.s));
      for (std::int64_t j = 0; j < batch && !stopped; ++j) {
        const std::int64_t t = t0 + j;
        float ms = 0;
        D9M_CUDA_CHECK(cudaEventElapsedTime(&ms, starts[j].e, stops[j].e));
        TrialResult r;
        r.elapsed_ns = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
        const std::uint64_t* h = t == 0 ? &host_digests[2 * kMaxBatch] : &host_digests[2 * j];
        r.digest = Digest128{h[0], h[1]}.hex();
        r.choice = choices[static_cast<std::size_t>(j)];
        if (t > 0 && r.digest != outcome.trials.front().digest) r.diff = to_diff_stats(host_diffs[j]);
        outcome.trials.push_back(std::move(r));
        if (after_trial && !after_trial(t + 1, trials)) stopped = true;
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      const double per_trial = seconds / static_cast<double>(batch);
      next_batch = per_trial > 0 ? std::clamp<std::int64_t>(static_cast<std::int64_t>(kBatchSeconds / per_trial), 1, kMaxBatch)
                                 : kMaxBatch;
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
