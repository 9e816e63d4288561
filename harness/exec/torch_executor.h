// The executor of Backend::torch: PyTorch's own kernels (kernels/torch), run in a Python process
// (bindings/python/d9m_torch/worker.py) started on the first case and kept for the next ones.
// It hands over d9m's inputs and takes back each trial's output as bytes, which it digests and
// compares with trial 0 as the other executors do, so a torch case is the same evidence as any.
//
// The interpreter is $D9M_PYTHON (default python3); where d9m_torch lives, $D9M_PYTHONPATH (by
// default bindings/python beside the binary's checkout). Without PyTorch its cases are SKIPPED
// with the import error. The worker runs on PyTorch's CUDA device when it has one, else the CPU;
// `stack()` says which, with PyTorch's versions, for the run's fingerprint.
#pragma once
#include <sys/types.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/exec/executor.h"

namespace d9m {

// What the torch worker's watchdog throws (TorchExecutor's timeout_s).
struct WatchdogTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The tensors a process's TorchExecutor hands its Python worker lie in a folder of its own,
// <temp>/d9m-torch-<pid of that process>-XXXXXX, which it removes when it ends. A worker process
// that died first (a crash, the watchdog's SIGKILL) cannot: whoever reaps it removes them.
void remove_torch_folders_of(pid_t pid);

class TorchExecutor final : public Executor {
 public:
  // timeout_s > 0: the longest wait for any answer of the worker (a trial, a prepare, its start);
  // past it the worker is killed and the call throws. For cases run without worker isolation,
  // where nothing else would stop a trial that hangs; 0 waits for ever.
  explicit TorchExecutor(unsigned threads, double timeout_s = 0);
  ~TorchExecutor() override;
  TorchExecutor(const TorchExecutor&) = delete;
  TorchExecutor& operator=(const TorchExecutor&) = delete;

  std::optional<std::string> unavailable() const override;
  CaseOutcome run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs, std::int64_t trials,
                  bool keep_first_output, const TrialCallback& after_trial) override;
  // PyTorch's variants choose nothing d9m can replay (its own autotuning stays inside the worker).
  HostTensor run_once(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                      OnceChoice* choice = nullptr) override;
  std::string memory_name() const override { return "host memory"; }
  // PyTorch's device as its worker greeted (CUDA where it has one); false before it started.
  bool on_device() const override { return hello_.is_object() && hello_.value("device", "") == "cuda"; }

  // The longest line the worker may send: past it without a newline, the case fails.
  static constexpr std::size_t kMaxMessageBytes = std::size_t{16} << 20;
  std::optional<std::uint64_t> memory_free() const override { return host_memory_free(); }
  std::uint64_t memory_held(const Problem& p) const override;

  // The worker's greeting: PyTorch's version, its device, its CUDA and cuDNN; null without PyTorch.
  const nlohmann::json& stack();

 private:
  void start();
  void ensure_worker();  // started (making the tensors' folder), or throws why it cannot be
  void stop();
  nlohmann::json receive(const std::string& doing);
  nlohmann::json ask(const nlohmann::json& msg, const std::string& doing);
  std::optional<Claim> prepare(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs);
  std::int64_t trial(std::int64_t k, const TensorDesc& out, void* into);

  unsigned threads_;
  double timeout_s_;
  bool started_ = false;
  std::optional<std::string> unavailable_;
  std::optional<std::string> start_error_;  // a start the watchdog cut short, for the next case to report
  nlohmann::json hello_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_, dir_, output_path_;
};


}  // namespace d9m
