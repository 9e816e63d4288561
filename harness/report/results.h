// What a store says, case by case and stack by stack: the evidence every report is derived from
// (report/model.h turns it into the status table and the verdict). One CaseResult is one case on
// one stack, all its runs together (process-to-process evidence).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/batch_invariance.h"
#include "harness/core/value_check.h"
#include "harness/report/trace_diff.h"
#include "harness/store/manifest.h"
#include "harness/store/store.h"
#include "kernels/registry.h"

namespace d9m {

struct StackInfo {
  std::string id;            // fingerprint id
  std::string label;         // "S1", "S2", ... in order of first run
  nlohmann::json fingerprint;
  std::int64_t runs = 0;
  std::vector<std::string> hosts;
  std::string summary() const;  // one line: CPU, OS, compiler, GPU
};

// A case in words: "op/config/variant", then " at DTYPE[ MATH]" where they are not the defaults.
std::string case_label(const std::string& op, const std::string& config, const std::string& variant, const std::string& dtype,
                       const std::string& math);

struct CaseResult {
  std::string stack, case_id, op, variant, backend, config, config_id, params, input_digest;
  std::string output_dtype, output_shape;
  std::string dtype = "f32", math = "default";  // the config's precision (store schema 4)
  // The table's row label of the case's op: the op, then its dtype and math mode where they are
  // not the defaults ("matmul", "matmul f16", "matmul f32 tf32").
  std::string source() const;
  // The case in words: "op/config/variant", then " at DTYPE[ MATH]" where they are not the
  // defaults, so that two configs of one name at two precisions (two catalogues' "x") stay two
  // cases in every message, test name and attestation (found by review: they read alike).
  std::string label() const;
  // The claim, role and detail of the latest run that recorded the case (claims may be refined
  // between d9m versions).
  std::string claim_determinism, claim_source, claim_reason, bit_equal_to;
  Role role = Role::unset;  // unset: a role this d9m does not know
  // Over all runs: divergence (more than one digest) wins over everything, then evidence
  // (DETERMINISTIC), then ERROR, UNSUPPORTED, SKIPPED. A run that ended in ERROR beside runs with
  // evidence is counted in error_runs and named in detail.
  Status status = Status::error;
  std::string detail;
  std::int64_t trials = 0, distinct = 0, runs = 0, error_runs = 0;
  std::string digest;                  // most frequent output digest
  std::optional<std::int64_t> median_ns, min_ns;
  // Against each run's first trial, each column's worst over the trials that differ: the most
  // elements, the largest absolute and ULP differences, the lowest first index.
  std::optional<DiffStats> worst_diff;
  // Batch invariance: every run's sub-batches together (store schema 5), when the config asked.
  std::optional<InvarianceEvidence> invariance;
  // The values against the serial reference: the worst over the runs that checked them (store
  // schema 9); absent where none did (the reference itself, stores written before schema 9).
  std::optional<ValueCheck> values;
  bool values_wrong() const { return values && values->outcome == ValueCheck::Outcome::differs; }
  // An autotuning variant's choices over all its trials (store schema 5): per choice, the trials
  // that made it and the distinct digests they gave, most frequent first; and how often a trial
  // chose otherwise than the trial before it in the same run.
  struct Choice {
    std::string name;
    std::int64_t trials = 0, distinct = 0;
  };
  std::vector<Choice> choices;
  std::int64_t choice_changes = 0;

  // cuDNN's word for the case (batch_invariance.h invariance_status()), or empty without evidence.
  std::string invariance_status() const;

  // Zero divergences in the N - 1 comparisons with the first trial bound the per-trial
  // divergence probability below 1 - 0.05^(1/(N-1)) at 95% confidence.
  double bound95() const;
  bool claim_broken() const { return claim_determinism == "deterministic" && status == Status::nondeterministic; }
  bool is_control() const;  // a case of the controls' config (runner.h canary_cases)
};

struct RunRow {
  std::string id, stack, host, state, started_at, finished_at, arguments, catalog_digest, d9m_version, d9m_commit, chain_root;
  std::int64_t trials_per_case = 0, threads = 0;
  std::int64_t resumes = 0;  // times resumed after an interruption
  // The nondeterministic controls (variants) this run recorded that did not diverge within it: a
  // run that could not have seen nondeterminism on their backend, whatever other runs saw.
  std::vector<std::string> quiet_controls;
  // The state as a person reads it: "complete", "complete (resumed 2x)", "interrupted", ...
  std::string state_text() const { return resumes ? state + " (resumed " + std::to_string(resumes) + "x)" : state; }
};

struct ReportData {
  std::string store_path;
  // The store file's SHA-256, where the caller took it with nothing in a write-ahead log (`report
  // --audit` under a SingleFileSnapshot): the audit sections quote it. Empty: not taken.
  std::string store_sha256;
  std::vector<RunRow> run_rows;
  std::string generated_at;
  std::vector<StackInfo> stacks;
  std::vector<CaseResult> results;  // ordered by op, config, variant, stack
  std::vector<std::string> catalog_digests, d9m_versions;
  std::vector<std::int64_t> trials_per_case, threads;
  std::int64_t runs = 0, interrupted_runs = 0;
  Evidence evidence;  // of the whole store: what binds a rendered report to it (d9m attest)
  // The part of the store the results cover when not all of it ("run <id>", "stacks S1, S3"):
  // the table and verdict are then of that part only, while `evidence` stays the whole store's,
  // so every format names the selection and `d9m attest` (whose statement is of the whole
  // store) refuses such a report. Empty: the whole store.
  std::string selection;
  // A report of selected stacks or of one run (not `d9m run`'s own verdict): its verdict warns of
  // claims to another implementation's bits whose partner is outside the selection.
  bool warn_unpaired_claims = false;
  // The pipeline cases of the reported runs, with the trace diff of each that diverged
  // (trace_diff.h pipeline_traces): `d9m report` loads them for md and html; empty otherwise.
  std::vector<PipelineTrace> pipelines;
  // `d9m run`'s verdict (load_run_evidence): the store's other results and their stacks, kept only
  // as partners of claims to another implementation's bits, so that the run checks a claim of its
  // cases whose partner an earlier run recorded, and a claim an earlier case makes to one of its
  // cases, as `d9m report` does. Not in the table, the counts or any other check.
  std::vector<CaseResult> partners;
  std::vector<StackInfo> partner_stacks;

  // Any stack of `stacks` or `partner_stacks`.
  const StackInfo& stack(const std::string& id) const;
  // Whether `id` is one of `stacks` (reported, or selected by --stacks).
  bool reports_stack(const std::string& id) const;
};

// Refuses (a store fault naming it) a store holding a fingerprint whose id is not the SHA-256 of
// its canonical text: an edited fingerprint makes a stack of its own and unpairs the claims checked
// across stacks. Every report checks the fingerprints its runs use while loading; `d9m run` checks
// every one (as `d9m verify` does) before its first case: it adds no evidence to an edited store,
// and does no work whose verdict it could not read back.
void check_fingerprint_ids(const Store& store);

// Loads every run, or only `run_id`'s when given.
ReportData load_report_data(const Store& store, const std::optional<std::string>& run_id = std::nullopt);

// What `d9m run` judges when it ends: the cases `run_id` recorded, on its stack, with every run's
// evidence for them. A later run on the same stack adds process-to-process evidence to the same
// cells, so a case whose digest differs from an earlier run's diverged, though each run alone
// gave one digest; cases the run did not record are left to `d9m report`, except as the partners
// of claims to another implementation's bits (ReportData::partners).
ReportData load_run_evidence(const Store& store, const std::string& run_id);

}  // namespace d9m
