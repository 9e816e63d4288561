// One case (a config and a variant, N trials), executed in this process: the inputs, the
// unsupported check, the trials on the variant's backend, the saved .npy files. The runner calls
// it directly (--no-isolation) or through a worker process (harness/exec/worker.h), which calls it
// on the other side of a pipe; either way the result is a CaseExecution.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/core/value_check.h"
#include "harness/exec/executor.h"
#include "harness/exec/value_checker.h"

namespace d9m {

struct CaseRequest {
  const CatalogConfig* config = nullptr;
  const VariantDef* variant = nullptr;
  std::int64_t trials = 0;
  std::optional<std::string> save_outputs;  // folder for .npy inputs and the first output
};

struct CaseExecution {
  enum class Kind { ran, unsupported, skipped, error };
  Kind kind = Kind::error;
  std::string input_digest;    // empty only when the case died before its inputs were made
  std::string detail;          // why UNSUPPORTED, SKIPPED or ERROR
  std::optional<Claim> claim;  // the vendor API's claim for this config, when prepare() gave one
  std::vector<TrialResult> trials;
  // The config's sub-batches against the full batch, when it names batch_invariance and every
  // trial ran (harness/core/batch_invariance.h).
  std::optional<InvarianceEvidence> invariance;
  bool device_lost = false;    // the case left the GPU unusable: a worker exits after replying
  // The first trial's output against the op's serial reference (harness/core/value_check.h), when
  // every trial ran; absent for the reference itself, which defines the values.
  std::optional<ValueCheck> values;
};

// Called once the inputs exist, with their digest (a worker sends it at once, so that the case
// keeps its identity even if the process dies in the trials).
using InputsCallback = std::function<void(const std::string& input_digest)>;

class CaseHost {
 public:
  // timeout_s > 0: the watchdog of the torch backend's worker process (TorchExecutor), for cases
  // run here rather than in an isolating worker; 0 for none.
  explicit CaseHost(unsigned threads, double timeout_s = 0);
  ~CaseHost();
  // Error (ExitCode) from the harness itself (an unwritable outputs folder) propagates: that
  // is the environment failing, not the case.
  CaseExecution run(const CaseRequest& req, const InputsCallback& on_inputs, const TrialCallback& after_trial);

 private:
  struct Prepared {
    std::vector<HostTensor> inputs;
    std::string input_digest;
    ValueChecker::References references;  // the values these inputs are checked against
  };
  std::map<Backend, std::unique_ptr<Executor>> executors_;
  std::map<const CatalogConfig*, Prepared> prepared_;  // the current config's inputs, made once
  ValueChecker values_;
};

}  // namespace d9m
