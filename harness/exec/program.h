// `d9m exec` (DESIGN.md "Pipelines and traces"; issue 14 item 3): a user's own program run N
// times in fresh processes with the same environment, its declared output files digested (raw
// bytes; per tensor for .npy and .safetensors), stored as a run of the store, and, when the
// program writes a trace through the PyTorch hook (bindings/python/d9m_torch), its ops as trace
// rows that `d9m trace diff` reads as it reads a pipeline's.
//
// Every trial runs before the store is opened: a command that fails, an output missing or not
// rewritten by a trial, or a bad trace file is an error (exit 2) and nothing is stored.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/store/store.h"

namespace d9m {

struct ProgramOptions {
  std::vector<std::string> command;  // argv; run with execvp, the environment as it is plus D9M_TRIAL, D9M_TRACE
  std::vector<std::string> outputs;  // globs (glob(3)) relative to the working directory
  std::int64_t trials = 3;
  std::string name;                  // the cases' op is "exec:NAME"; empty: from the command
  double timeout_s = 0;              // a trial running longer is killed (its process group) and refused; 0: no limit
  std::string arguments_json = "[]";
};

// One output of every trial: its digest per trial, and its diff stats against trial 0.
struct ProgramOutput {
  std::string name;        // the file, or FILE:TENSOR
  std::string dtype;       // d9m's dtype name, or the file's own ("uint8" for raw bytes)
  std::string shape;       // "[2,3]"
  std::vector<std::string> digests;
  std::vector<std::optional<DiffStats>> diffs;
};

struct ProgramTrace {
  std::vector<TraceRecord> rows;     // every trial's, in (trial, step, position) order
  std::vector<std::string> digests;  // per trial: its trajectory
  std::vector<std::optional<DiffStats>> diffs;  // per trial: differing op outputs against trial 0
};

struct ProgramTrials {
  std::vector<ProgramOutput> outputs;
  std::optional<ProgramTrace> trace;
  std::vector<std::int64_t> elapsed_ns;  // per trial, the process's wall time
  std::string input_digest;              // of the command line
};

// The name a command's cases get: the script an interpreter runs (python3 x.py -> x.py), else the
// program's file name, with any character a config name may not hold replaced by '_'.
std::string program_name(const std::vector<std::string>& command);

// Runs the trials; Error(usage) naming the trial and what went wrong when one fails.
ProgramTrials run_program_trials(const ProgramOptions& opt);
// Stores them as one run (a case per output, and one for the trace); returns its id.
std::string store_program(const ProgramOptions& opt, const ProgramTrials& t, Store& store);

}  // namespace d9m
