// Runs a pipeline case (harness/core/catalog.h, CatalogPipeline): one setting of a training step,
// `steps` steps per trial, N trials, each trial from the same initial state. Every op's inputs
// and output are digested as it runs and become trace rows. A trial's digest is that of its
// trajectory (every op output of every step, in order), so DETERMINISTIC means every
// intermediate output reproduced, not only the final parameters; a differing trial's diff stats
// compare the final state (the trained parameters end to end: 0 elements where a difference
// healed).
//
// Each op of the first step in the first trial is also checked against its serial reference on
// the same inputs (harness/exec/value_checker.h; a wrong kernel is wrong on any step's inputs):
// the case's value check is the op that came farthest toward its allowance, or beyond it, or
// unchecked naming the ops not checked.
//
// An autotuning op (cudnn.autotune, cpu.autotune) searches at its first call in a trial and
// replays that choice in the trial's later calls of the same shape (KernelArgs::replay), as a
// framework searches once per process; the trial's choice (TrialResult::choice) names each
// search's winner, so the report shows how often it changed between trials.
//
// Each op runs through its backend's executor (Executor::run_once), so a CUDA op copies its
// inputs to the device and its output back: the state lives on the host between ops. Pipelines
// run in the runner's process, not in a worker (a crash in a kernel ends the run).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/exec/case_exec.h"
#include "harness/exec/value_checker.h"
#include "harness/store/store.h"

namespace d9m {

// What the store keeps of a pipeline case: its case row's identity and claim, its trials (in the
// execution) and its trace.
struct PipelineExecution {
  CaseExecution result;
  std::vector<TraceRecord> trace;
};

// The case identity of (pipeline, setting): op "pipeline:NAME", config "N_steps", variant the
// setting's name, params the definition with the setting's variants; the output dtype and shape
// are the final state's (what the diff stats count).
CaseRecord pipeline_case_record(const CatalogPipeline& pl, const PipelineSetting& s, const std::string& input_digest);
// The setting's backend: cuda when any op runs on the GPU.
Backend pipeline_backend(const PipelineSetting& s);
// What the setting is, from its ops' variants: atomic when one races by construction, else vendor
// or autotune when one is library code, else ordered (d9m's own fixed orders all through).
Role pipeline_role(const PipelineSetting& s);
// Deterministic when every op's variant claims so, nondeterministic when one claims otherwise
// (the claim names them), else unknown; by design.
Claim pipeline_claim(const CatalogPipeline& pl, const PipelineSetting& s);

class PipelineHost {
 public:
  // One op's value check (harness/exec/value_checker.h); none for an op run by its reference variant.
  struct OpCheck {
    std::string op;
    std::optional<ValueCheck> check;
  };
  // timeout_s: the PyTorch worker's watchdog for a torch op (TorchExecutor); d9m's own ops run
  // in this process with none, as cases do without worker isolation.
  PipelineHost(unsigned threads, double timeout_s);
  ~PipelineHost();
  // `after_trial` as for a case: called after each trial, false stops (the result is then not
  // evidence). Errors of the harness itself (Error) propagate.
  PipelineExecution run(const CatalogPipeline& pl, const PipelineSetting& s, std::int64_t trials, const TrialCallback& after_trial);

 private:
  Executor& executor(Backend b);
  OpCheck check_op(const PipelineStep& op, const VariantDef& v, const std::vector<HostTensor>& inputs, const HostTensor& output);
  std::optional<ValueChecker> values_;
  unsigned threads_;
  double timeout_s_;
  std::map<Backend, std::unique_ptr<Executor>> executors_;
};

}  // namespace d9m
