// Runs the trials of one case on one backend. The runner is backend-agnostic: it hands the
// executor a variant, its problem and the host inputs, and gets back one digest per trial.
// The CPU executor lives in cpu_executor.cpp; a CUDA executor keeps inputs and the first
// trial's output on the device and returns only digests and diff stats (issue 3).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/inputs.h"
#include "harness/core/evidence.h"
#include "kernels/registry.h"

namespace d9m {

// The byte an output is filled with before trial `trial`, so that a variant that forgets to
// initialise its output inherits neither the previous trial's bytes nor zeros. All ones in even
// trials, the first included: a NaN in every float dtype (f16, bf16, f32, f64), -1 in i32, so a
// variant that accumulates into its output without clearing it gives NaN, which the value check
// reports as differing (found by review: the earlier constant 0xA5, about -2.9e-16 in f32 and
// bf16, left such an output repeatable and within tolerance). 0xA5 in odd trials: an output that
// depends on the fill in any way (a maximum that passes over NaN, say) then differs between trials.
constexpr unsigned char output_poison(std::int64_t trial) { return trial % 2 ? 0xA5 : 0xFF; }

class ThreadPool;

struct TrialResult {
  std::string digest;
  std::int64_t elapsed_ns = 0;
  std::optional<DiffStats> diff;
  std::string choice;  // what an autotuning variant chose in this trial (KernelArgs::chose), or empty
};

struct CaseOutcome {
  std::optional<Claim> claim;  // the vendor API's claim for this config, when prepare() gave one
  std::vector<TrialResult> trials;
  std::optional<HostTensor> first_output;  // kept when the caller asks (for --save-outputs)
};

// An autotuning variant's choice across calls of Executor::run_once: what a call chose, and a
// choice made before for it to run again without searching (KernelArgs::replay).
struct OnceChoice {
  std::string replay;  // empty: search, as in a new process
  std::string made;    // what the call chose; empty where the variant chooses nothing
};

// Called after each trial with (trials done, trials total); returning false stops the case.
using TrialCallback = std::function<bool(std::int64_t, std::int64_t)>;

class Executor {
 public:
  virtual ~Executor() = default;
  // Empty when cases of this backend can run here; otherwise why not (they are SKIPPED).
  virtual std::optional<std::string> unavailable() const = 0;
  virtual CaseOutcome run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                          std::int64_t trials, bool keep_first_output, const TrialCallback& after_trial) = 0;
  // One untimed run of `v` on `p` (a sub-batch, for batch invariance; a pipeline's op): its
  // output, on the host. Where `choice` is given, an autotuning variant says there what it chose
  // (KernelArgs::chose) and runs `choice->replay` instead of searching where that is not empty.
  // Throws Unsupported where prepare() does, and what the backend throws.
  virtual HostTensor run_once(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                              OnceChoice* choice = nullptr) = 0;
  // After a sticky error the device (its context) is unusable for the rest of this process.
  virtual bool device_lost() const { return false; }
  // The memory cases of this backend draw on: its name in messages ("host memory", "device
  // memory"), how much of it is free now (nullopt where that cannot be told), and how much the
  // executor itself holds while a case of `p` runs (the first and the current output, and on a
  // device the inputs).
  virtual std::string memory_name() const = 0;
  // Whether cases run off the host CPU (a GPU), where libraries may use TF32 unasked and math
  // functions round otherwise than the host's (accepted_difference in kernels/registry.h).
  virtual bool on_device() const = 0;
  // Whether trial digests are computed by other code than the host's digest_v1 (the GPU digest of
  // harness/core/gpu_digest.cu): the runner then checks trial 0's against the host digest of the
  // same output (check_digest_of_first_output), so a wrong device digest cannot become evidence.
  virtual bool digests_off_host() const { return false; }
  virtual std::optional<std::uint64_t> memory_free() const = 0;
  virtual std::uint64_t memory_held(const Problem& p) const = 0;
};

// Why a case of `v` on `p` cannot run on `ex` for lack of memory, naming what it needs (the
// executor's own buffers and the variant's working memory, VariantDef::memory) and what is free;
// nullopt when it fits or the free memory cannot be told.
std::optional<std::string> memory_refusal(const Executor& ex, const VariantDef& v, const Problem& p);
// Bytes in words: "512 KiB", "3.2 MiB", "29.8 GiB".
std::string memory_text(std::uint64_t bytes);
// Host memory free to this process: /proc/meminfo's MemAvailable, bounded by its cgroup's limit.
std::optional<std::uint64_t> host_memory_free();

std::unique_ptr<Executor> make_cpu_executor(unsigned threads);
// The CUDA executor of this build, or one that reports why CUDA cases cannot run.
std::unique_ptr<Executor> make_cuda_executor();
// PyTorch's kernels, in a Python worker started on the first case (harness/exec/torch_executor.h).
std::unique_ptr<Executor> make_torch_executor(unsigned threads, double timeout_s = 0);  // torch_executor.h

// Throws std::runtime_error, naming both digests, when `reported` (trial 0's digest as an executor
// computed it off the host) is not d9m-digest-v1 of `output`, trial 0's output brought to the host.
void check_digest_of_first_output(const HostTensor& output, const std::string& reported);

// Element-wise comparison of two outputs of one dtype (bitwise; ULP distance on float32).
DiffStats diff_outputs(DType dtype, const void* first, const void* other, std::int64_t elements);

// The trial loop of the executors whose outputs land on the host (CPU, PyTorch's worker):
// `one_trial(t, out, choice)` runs trial t into `out` (p.output's bytes), may name the algorithm
// it chose, and returns its time in ns; the loop digests each output (on `pool` when given), diffs
// one whose digest differs from trial 0's against trial 0's output, and stops where `after_trial`
// says so. `outcome.claim` is the caller's to set.
using HostTrial = std::function<std::int64_t(std::int64_t t, void* out, std::string& choice)>;
CaseOutcome run_host_trials(const Problem& p, std::int64_t trials, bool keep_first_output, const TrialCallback& after_trial,
                            ThreadPool* pool, const HostTrial& one_trial);

}  // namespace d9m
