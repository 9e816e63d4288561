// The audit: every selected case of the catalogue, N trials each, into the store.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/store/store.h"

namespace d9m {

class Worker;  // harness/exec/worker.h

struct Selection {
  std::string backend = "all";             // cpu | cuda | torch | all, or a comma-separated list
  std::vector<std::string> op_globs;       // empty: every op
  std::vector<std::string> variant_globs;  // empty: every variant
  std::vector<std::string> config_globs;   // empty: every config
  // Pipelines (catalog.h): empty runs every pipeline of the catalogue unless an op, variant or
  // config glob narrows the run to configs; given alone, it runs those pipelines and no config.
  std::vector<std::string> pipeline_globs;
};

// Whether `selection` (--backend) names backend `b`: "all" is d9m's own backends, cpu and cuda;
// PyTorch's (torch) runs only when named, since it starts Python and audits another program.
bool backend_selected(const std::string& selection, Backend b);
// Empty when every comma-separated item of `selection` is a backend or "all"; else the message.
std::string backend_list_error(const std::string& selection);

struct PlannedCase {
  const CatalogConfig* config;
  const VariantDef* variant;
};

struct PlannedPipeline {
  const CatalogPipeline* pipeline;
  const PipelineSetting* setting;
};

// The cases a selection picks, in catalogue order, a config's reference variant first (its
// output is the value check's reference for the rest of the config). A glob that matches nothing is a usage
// error that lists what exists, so a typo never silently audits nothing; so is a selection
// that picks neither a case nor a pipeline.
std::vector<PlannedCase> plan_cases(const Catalog& cat, const Registry& reg, const Selection& sel);
// The pipeline cases (pipeline, setting) a selection picks, in catalogue order.
std::vector<PlannedPipeline> plan_pipelines(const Catalog& cat, const Selection& sel);

struct RunOptions {
  std::int64_t trials = 20;
  unsigned threads = 1;
  std::optional<std::string> save_outputs;  // folder for .npy inputs and outputs
  bool progress = false;                    // case and trial progress on stderr
  bool canaries = true;                     // include the deterministic and nondeterministic controls
  bool resume = false;                      // continue the newest interrupted run of the same plan
  // Isolation (harness/exec/worker.h): the worker that runs the cases, which the caller may have
  // started already, before its catalogue was loaded (cli/run.cpp); the run gives it the catalogue
  // and closes its requests at the end. Null runs every case in this process.
  std::shared_ptr<Worker> worker;
  double case_timeout_s = 300;              // the watchdog: longest wait for a case's next trial
  std::string arguments_json = "[]";
};

struct RunSummary {
  std::string run_id, fingerprint_id;
  std::int64_t cases = 0;
  std::int64_t by_status[5] = {};          // indexed by Status (the verdict is report/model.h's, read from the store)
  bool interrupted = false;
  std::int64_t resumed_cases = 0;  // cases an interrupted run had stored, kept when resuming it
  std::int64_t resumes = 0;        // how often this run has been resumed (0: a fresh run)
  int resume_busy = 0;             // --resume: matching runs another process held (so a new run started)
};

// What a run sets out to do, as --resume compares it: the cases in order (op, config and its
// content id, variant), N and the thread count. SHA-256 hex.
std::string plan_digest(const std::vector<PlannedCase>& cases, std::int64_t trials, unsigned threads,
                        const std::vector<PlannedPipeline>& pipelines = {});

// The cases, then the pipelines (in this process: harness/exec/pipeline_exec.h).
RunSummary run_audit(const Catalog& cat, const std::vector<PlannedCase>& cases, Store& store, const RunOptions& opt,
                     const std::vector<PlannedPipeline>& pipelines = {});

// The control cases for the backends `cases` use: per backend, the deterministic control
// (cpu.serial / cuda.ordered) and the nondeterministic one (cpu.atomic / cuda.atomic).
std::vector<PlannedCase> canary_cases(const std::vector<PlannedCase>& cases, const Registry& reg,
                                      const std::vector<PlannedPipeline>& pipelines = {});

// Set from a signal handler: the run stops after the current trial and is marked interrupted.
void request_stop();

}  // namespace d9m
