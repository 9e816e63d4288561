// `d9m trace diff` (DESIGN.md "Pipelines and traces"): two traces of one pipeline case compared op
// by op, in the order the ops ran. The first op whose inputs are bit-equal on both sides and whose
// output differs is the *source* of the divergence; every difference after it is *propagated*.
// Each side is a trial of a run of a store: two trials of one run, or of two runs or stores.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/evidence.h"
#include "harness/store/store.h"

namespace d9m {

// One side of the comparison, as the command line names it: STORE[@RUN_ID_PREFIX][#TRIAL].
struct TraceOperand {
  std::string store;
  std::string run_prefix;        // empty: the newest run with traces
  std::optional<std::int64_t> trial;
};

// An operand's store, read-only; Error(usage) for a folder.
Store open_trace_store(const std::string& path);

// Parses an operand; a path that exists is taken whole (it may hold '@' or '#').
TraceOperand parse_trace_operand(const std::string& text);

struct TraceSideInfo {
  std::string store, run_id, case_id, started_at;
  std::int64_t trial = 0;
  std::string trial_digest;  // the trial's digest: its trajectory (harness/exec/pipeline_exec.h)
  std::string choice;        // what its autotuning ops chose ("conv1: algo1"), empty where none did
};

struct TraceOpRow {
  std::int64_t step = 0, position = 0;
  std::string name, op, variant_a, variant_b;
  bool inputs_equal = true, output_equal = true;
  std::optional<DiffStats> diff;  // where known: b against a when a is trial 0 of b's run
  bool updates_state = false;     // its output is a parameter (state the op updates)
};

struct StepDivergence {
  std::int64_t step = 0;
  std::int64_t outputs = 0, differing_outputs = 0;
  // Over the ops that update parameters, where diff stats are known (else nullopt).
  std::optional<std::int64_t> parameter_elements, parameter_max_ulp;
  std::int64_t parameters = 0, differing_parameters = 0;  // parameter updates this step, and how many differ
};

struct TraceSource {
  TraceOpRow row;
  // A program's trace (d9m exec) only: the divergence entered outside the traced ops, before this
  // row. Either the row's inputs and output differ though no traced output before it does, or the
  // two traces part here (other ops, or one ends) with every traced output before agreeing.
  bool outside = false;
  std::string claim_variant;  // whose claim follows: b's, or a's where only a's is not claimed deterministic
  std::string claim_determinism, claim_source, claim_reason;  // that variant's claim, as this build registers it
};

struct TraceDiff {
  std::string pipeline, setting_a, setting_b, config;
  TraceSideInfo a, b;
  std::int64_t steps = 0, ops_per_step = 0;
  bool stats_known = false;  // element counts and ULPs come from the store (b against trial 0 of its run)
  std::optional<TraceSource> source;
  std::int64_t propagated = 0;          // differing outputs after the source
  std::vector<std::string> notes;       // what a reader must know (variants that differ, ...)
  std::vector<StepDivergence> by_step;
};

// Every pipeline case of A's run (those named by `pipeline`, `setting` globs when given) diffed
// with the same pipeline case in B's run. With one operand (b empty), B is A's run too, trial
// 0 against the first trial whose trajectory differs (else trial 1). Bad operands, a trace from
// another pipeline or other inputs are Error(usage); an unreadable store Error(environment).
std::vector<TraceDiff> diff_traces(const TraceOperand& a, const std::optional<TraceOperand>& b, const std::string& pipeline_glob,
                                   const std::string& setting_glob);

// What `d9m report` shows of each pipeline case (op "pipeline:NAME") of a run, and of each
// program trace `d9m exec` stored through the PyTorch hook (op "exec:NAME", name kept): how many
// trajectories its trials gave and, where they diverged, the diff of trial 0 against the first
// trial whose trajectory differs (what `d9m trace diff` prints for that run).
struct PipelineTrace {
  std::string run_id, pipeline, setting, config;
  std::int64_t trials = 0, distinct = 0;  // trials, and distinct trajectories among them
  std::optional<TraceDiff> diff;          // where they diverged and the traces compare
  std::string problem;                    // where they diverged but do not compare (an edited trace), why
};
// The pipeline cases of these runs, in run order then the order the run recorded them, read
// through the caller's open store (one connection: inside a read transaction the caller holds).
// A store of a schema before traces gives none; an unreadable one is Error(environment).
std::vector<PipelineTrace> pipeline_traces(const Store& store, const std::vector<std::string>& run_ids);

// The parts of the HTML rendering that the report (report_html.cpp) shows too: the divergence
// chart by step as an inline SVG (no script), and the source in words (escaped HTML).
std::string trace_chart_svg(const TraceDiff& d);
std::string trace_source_html(const TraceDiff& d);

std::string render_trace_diff_markdown(const std::vector<TraceDiff>& diffs);
std::string render_trace_diff_json(const std::vector<TraceDiff>& diffs);
nlohmann::json trace_diff_json(const TraceDiff& d);  // one element of the above's "diffs", as the JSON report shows it too
std::string render_trace_diff_html(const std::vector<TraceDiff>& diffs);

}  // namespace d9m
