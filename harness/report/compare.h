// Comparing evidence: selecting stacks, stack-to-stack differences within a store, `d9m diff`
// between two stores, runs or stacks, and golden-digest baselines for nightly checks.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/report/results.h"

namespace d9m {

// Keeps only the stacks named by `selectors` (a label such as S2, a fingerprint id prefix of at
// least 6 hex digits, or a host name); an unknown selector is a usage error.
void select_stacks(ReportData& data, const std::vector<std::string>& selectors);

// `PATH[@SELECTOR]`: a store, optionally narrowed to one stack (label, fingerprint prefix, host)
// or one run (run:<id prefix>).
ReportData load_operand(const std::string& operand);

struct DiffReport {
  std::vector<std::string> regressions;  // deterministic claims that broke in B
  std::vector<std::string> status_changes, digest_changes, timing_changes;
  std::vector<std::string> only_a, only_b;
  std::int64_t compared = 0;
  std::int64_t compared_cases = 0;  // of them, beyond d9m's controls: none is a diff of nothing
  // Each side's stacks ("S1: summary"), and where one stack is compared with another, the
  // fingerprint fields in which they differ ("/gpu_driver/version: 575.57 -> 580.159"): a digest
  // change between two stacks is a stack difference, and the reader must see which.
  std::vector<std::string> stacks_a, stacks_b, stack_fields_differ;
  bool across_stacks = false;
};
// Timing changes count only beyond noise: B's median beyond A's by more than `timing_tolerance`
// (relative) and B's fastest trial beyond A's median (or the mirror image for speed-ups).
DiffReport diff_reports(const ReportData& a, const ReportData& b, double timing_tolerance = 0.25);
std::string render_diff(const DiffReport& d, const std::string& a, const std::string& b);

// Baselines: golden digests per stack and case ("d9m.baseline/1"), for the cases claimed
// deterministic whose evidence agreed. A store with no such case beyond d9m's controls is a
// usage error: its baseline could check nothing.
// Cases claimed deterministic that the verdict fails are not pinned; `left_out`, if given, names
// each with its failure.
nlohmann::json pin_baseline(const ReportData& data, std::vector<std::string>* left_out = nullptr);

// A baseline file as pin_baseline writes it, every field checked.
struct PinnedCase {
  std::string case_id, op, config, variant, input_digest, digest;
  std::string dtype = "f32", math = "default";  // optional in the file (baselines pinned before them)
  std::int64_t trials = 0;
};
struct BaselineStack {
  std::string id, summary;
  std::vector<PinnedCase> cases;
};
struct Baseline {
  std::vector<BaselineStack> stacks;
};
// Parses and validates `text` from `source` (a file name, for messages). A usage error names the
// place: LINE:COLUMN for JSON syntax, the field path for the rest
// ("base.json: stacks[0].cases[3].digest: expected 32 lowercase hex digits, got 5"). A
// baseline that pins no case at all is refused: it could never fail.
Baseline parse_baseline(const std::string& text, const std::string& source);

struct BaselineCheck {
  std::vector<std::string> drifted, missing, notes;
  std::int64_t checked = 0;
};
// Checks the store's evidence against the baseline. A baseline of which no case is in the store
// (d9m's controls aside) checks nothing, typically because it was pinned from another catalogue
// or on another stack: a usage error naming both sides, never a pass.
BaselineCheck check_baseline(const ReportData& data, const Baseline& baseline, const std::string& source);

}  // namespace d9m
