// The status table and the verdict, built once from what a store says (results.h) and only
// formatted by the renderers (report.h): every rule of the table lives here, once. The rules:
//
// - A row is an op at one precision (dtype and math mode) and one variant. A cell is that row on one stack, the worst over its configs in the order
//   NONDETERMINISTIC > ERROR > DETERMINISTIC > UNSUPPORTED > SKIPPED: evidence of divergence
//   wins (DESIGN.md "Status table").
// - A solution is, per op and backend, the deterministic variant most often fastest over the
//   fastest nondeterministic one, by median time per config and stack. Roles decide who may be a
//   solution: the serial reference (one thread by definition) and controls never are.
// - The verdict is the one that `run`, `report`, `ctest` and `attest` give. It fails on
//     a variant claimed deterministic that gave more than one digest (a diverging deterministic
//     control is listed once, as the control),
//     a variant whose claim to another implementation's bits did not hold,
//     a case that ended in ERROR in every run that recorded it (nothing was certified),
//     a case whose output was farther from the serial reference than its variant is allowed
//     (value_check.h): repeatable wrong values are not a determinism solution, and never offered as one.
//   Warnings do not fail it: a nondeterministic control that never diverged, runs that ended in
//   ERROR beside runs with evidence, a cuDNN outside its compatibility rule.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/report/results.h"

namespace d9m {

// A cross-implementation claim checked: `variant` claims the bits of `partner` on the same
// config, inputs and stack. Checked only where both gave one digest (status DETERMINISTIC).
struct CrossCheck {
  const CaseResult* result;  // the claiming case
  std::string partner, partner_digest;
  // The partner's stack: the claimant's, or one that differs from it only in the frameworks a run
  // drove (PyTorch), which d9m's own variants do not depend on.
  std::string partner_stack;
  bool equal() const { return result->digest == partner_digest; }
};

// A deterministic variant whose digest differs between two stacks on the same inputs.
struct StackDifference {
  std::string op, config, variant, stack_a, stack_b, digest_a, digest_b;
  std::string label;                            // CaseResult::label()
  std::string source, dtype = "f32", math = "default";  // CaseResult::source(): the op at its precision
};

// The cost of determinism of one op and config on one stack: the median time of the fastest
// deterministic-claimed variant that may be a solution over the fastest nondeterministic one.
struct Cost {
  std::string source, op, config, stack, backend, solution, against;  // source: CaseResult::source()
  double ratio = 0;
};

struct Solution {
  std::string source, backend, variant, reason, against, key;  // key: "a", "b", ... in the table's footnotes
  std::vector<double> ratios;  // one per config and stack where it ran beside a nondeterministic variant
  std::size_t values_unchecked = 0;  // of those, where its values could not be checked against the reference
  double geomean() const;
  double lowest() const;
  double highest() const;
};

struct StatusCell {
  Status status = Status::skipped;
  std::string text = "-";  // "D", "ND 7/20", "ND 7/20 (2 of 3 configs)", "E", "U", "-"
  bool broken = false;     // a claim of this variant failed on this stack (see Verdict)
  std::size_t configs = 0, nd_configs = 0;
  std::size_t ran_configs = 0;  // configs that gave evidence (D or ND): the "of n" in the text
  std::size_t wrong_configs = 0;  // configs whose values were farther from the serial reference than allowed
  // Batch invariance in cuDNN's words over the configs that tested it, the worst of them
  // (Not guaranteed > Replay only > Unverified > Supported); empty where none did.
  std::string invariance;
};

// The library a variant calls, by the registry's naming convention for library variants
// ("cublas.default", "cublaslt.algo3", "cudnn.algo1", "cub.run_to_run", "cusparse.spmv_csr_alg2",
// "torch.default"), or "d9m" for d9m's own code: what the HTML report filters by.
std::string library_of(const std::string& variant);

// One row: an op at one precision (its source, CaseResult::source()) and one variant.
struct StatusRow {
  std::string source, op, dtype, math, variant, backend, library;
  Role role = Role::unset;
  std::string claim_determinism, claim_source, claim_reason;
  std::vector<StatusCell> cells;  // one per stack, in ReportData::stacks order
  int solution = -1;  // rows claimed nondeterministic, or mixed and diverged: index in StatusModel::solutions of what fixes them
  bool control = false;  // d9m's controls (config _canary): evidence about the stack, nothing to fix
};

struct Failure {
  enum class Kind { diverged, control_diverged, cross_implementation, error, not_invariant, wrong_values };
  Kind kind;
  const CaseResult* result;
  std::string text;  // "op/config/variant on S1: ..."
};
std::string to_string(Failure::Kind k);  // for people: "claim broken", "control diverged", ...
std::string id_of(Failure::Kind k);      // for programs: "diverged", "control_diverged", "cross_implementation", "error", "not_invariant", "wrong_values"

struct Verdict {
  std::int64_t cases = 0, by_status[5] = {};
  std::vector<Failure> failures;
  std::vector<std::string> warnings;
  // Per variant claimed nondeterministic: cases where it diverged, of the cases with evidence.
  struct Seen {
    std::string variant;
    std::int64_t diverged = 0, cases = 0;
  };
  std::vector<Seen> nondeterministic_seen;
  // Deterministic results claiming another implementation's bits with no partner to check them.
  std::int64_t unpaired_claims = 0;
  // Cases with evidence (DETERMINISTIC or NONDETERMINISTIC), d9m's controls aside. A verdict over
  // none holds only because nothing was tested: its words are NO EVIDENCE, not PASS, and `d9m
  // attest` refuses to sign it.
  std::int64_t certified = 0;

  bool held() const { return failures.empty(); }
  bool certifies_nothing() const { return held() && certified == 0; }
  std::string no_evidence() const;  // what a verdict that certifies nothing saw, in words
  // The verdict in words, one line each: the counts, the nondeterministic variants seen, PASS or
  // FAIL with every failure, then the warnings. Markdown, HTML and `d9m run` print these.
  std::vector<std::string> lines() const;
  std::vector<const Failure*> failures_of(const CaseResult& r) const;
  bool claim_failed(const CaseResult& r) const;  // a failure of r other than ERROR: one of its claims broke
};

// The view of cuDNN's "Determinism support" page: per library API (op, math mode and variant),
// per stack and dtype, both properties: repeatability ("D", "ND 3/20") and batch invariance.
struct ApiView {
  struct Cell {
    std::string repeatability, invariance;
  };
  struct Row {
    std::string library, op, math, variant, claim;
    std::map<std::pair<std::size_t, std::string>, Cell> cells;  // by (stack index, dtype)
  };
  std::vector<std::string> dtypes;  // the dtypes any library row ran in, f32 first
  std::vector<Row> rows;            // library rows only (d9m's own variants are in the status table)
};

struct StatusModel {
  std::vector<StatusRow> rows;  // by op, then variant
  bool any_invariance = false;  // some case has batch-invariance evidence: the table shows its column
  ApiView api;
  std::vector<Solution> solutions;
  std::vector<Cost> costs;
  std::vector<CrossCheck> cross;
  std::vector<StackDifference> stack_differences;
  Verdict verdict;
};

// Results, failures and cross checks point into `data`, which must outlive the model unchanged.
StatusModel build_status_model(const ReportData& data);

// The same verdict without the rest of the table.
Verdict verdict_of(const ReportData& data);

}  // namespace d9m
