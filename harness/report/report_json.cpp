// The JSON report, "d9m.report/1": the public machine interface (docs/report-json.md). Fields
// are only ever added; consumers ignore the ones they do not know.
#include <cmath>

#include "harness/core/fingerprint.h"
#include "harness/core/json_text.h"
#include "harness/report/report.h"
#include "harness/report/trace_diff.h"

namespace d9m {

using nlohmann::json;

namespace {

json optional_number(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); }
// A difference as the values check writes it: "inf" where a NaN or an infinity met a number (JSON has no
// infinity; nlohmann would write null, found by review).
json difference(double x) { return std::isinf(x) || std::isnan(x) ? json("inf") : json(x); }

json result_json(const ReportData& data, const StatusModel& m, const CaseResult& r) {
  json failures = json::array();
  for (const Failure* f : m.verdict.failures_of(r)) failures.push_back(id_of(f->kind));
  json j = {{"op", r.op},
            {"variant", r.variant},
            {"role", to_string(r.role)},
            {"backend", r.backend},
            {"config", r.config},
            {"config_id", r.config_id},
            {"params", parse_stored_json(r.params)},
            {"dtype", r.dtype},
            {"math", r.math},
            {"stack", r.stack},
            {"stack_label", data.stack(r.stack).label},
            {"case_id", r.case_id},
            {"input_digest", r.input_digest},
            {"output", {{"dtype", r.output_dtype}, {"shape", r.output_shape}}},
            {"status", to_string(r.status)},
            {"detail", r.detail},
            {"runs", r.runs},
            {"error_runs", r.error_runs},
            {"trials", r.trials},
            {"distinct", r.distinct},
            {"digest", r.digest},
            {"claim", {{"determinism", r.claim_determinism}, {"source", r.claim_source}, {"reason", r.claim_reason}}},
            {"claim_broken", r.claim_broken()},
            {"failures", failures},
            {"bit_equal_to", r.bit_equal_to.empty() ? json(nullptr) : json(r.bit_equal_to)},
            {"bound95", r.status == Status::deterministic ? json(r.bound95()) : json(nullptr)},
            {"median_ns", optional_number(r.median_ns)},
            {"min_ns", optional_number(r.min_ns)}};
  if (r.invariance) {
    json subs = json::array();
    for (const auto& s : r.invariance->subs) {
      json sj = {{"size", s.size}, {"offset", s.offset}, {"elements", s.elements}, {"differing", s.differing}};
      if (!s.error.empty()) sj["error"] = s.error;
      subs.push_back(std::move(sj));
    }
    const std::string status = r.invariance_status();
    j["invariance"] = {{"status", status.empty() ? json(nullptr) : json(status)},
                       {"param", r.invariance->param},
                       {"full", r.invariance->full},
                       {"sizes", r.invariance->sizes()},
                       {"differing", r.invariance->differing()},
                       {"sub_batches", subs}};
    if (const auto& c = r.invariance->claim)
      j["invariance"]["claim"] = {{"invariant", c->determinism == Determinism::deterministic   ? json(true)
                                                : c->determinism == Determinism::nondeterministic ? json(false)
                                                                                                   : json(nullptr)},
                                  {"source", to_string(c->source)},
                                  {"reason", c->reason}};
  }
  // The same fields the store keeps: outcome, reference, and the difference or why it was not checked.
  if (r.values) j["values"] = json::parse(r.values->to_json_text());
  if (!r.choices.empty()) {
    json choices = json::array();
    for (const auto& c : r.choices) choices.push_back({{"choice", c.name}, {"trials", c.trials}, {"distinct", c.distinct}});
    j["autotune"] = {{"choices", choices}, {"changes", r.choice_changes}};
  }
  if (r.worst_diff)
    j["worst_diff"] = {{"count", r.worst_diff->count}, {"max_abs", difference(r.worst_diff->max_abs)},
                       {"max_ulp", r.worst_diff->max_ulp}, {"first_index", r.worst_diff->first_index}};
  return j;
}

json verdict_json(const Verdict& v) {
  json counts = json::object();
  for (int i = 0; i < 5; ++i) counts[to_string(static_cast<Status>(i))] = v.by_status[i];
  json failures = json::array(), broken = json::array();
  for (const auto& f : v.failures) {
    failures.push_back({{"kind", id_of(f.kind)}, {"case_id", f.result->case_id}, {"stack", f.result->stack}, {"text", f.text}});
    if (f.kind != Failure::Kind::error) broken.push_back(f.text);
  }
  return {{"passed", v.held()},
          {"claims_held", v.held()},  // the name of d9m.report/1's first version, kept for its readers
          {"certified", v.certified},
          {"failures", failures},
          {"broken", broken},
          {"warnings", v.warnings},
          {"counts", counts}};
}

}  // namespace

std::string render_json(const ReportData& data, const StatusModel& m) {
  json stacks = json::array();
  for (const auto& s : data.stacks)
    stacks.push_back({{"id", s.id}, {"label", s.label}, {"runs", s.runs}, {"hosts", s.hosts}, {"fingerprint", s.fingerprint}});
  json results = json::array();
  for (const auto& r : data.results) results.push_back(result_json(data, m, r));
  json costs = json::array();
  for (const auto& c : m.costs)
    costs.push_back({{"op", c.op}, {"source", c.source}, {"config", c.config}, {"stack", c.stack}, {"solution", c.solution},
                     {"against", c.against}, {"ratio", c.ratio}});
  json cross = json::array();
  for (const auto& c : m.cross)
    cross.push_back({{"op", c.result->op}, {"config", c.result->config}, {"stack", c.result->stack}, {"variant", c.result->variant},
                     {"partner", c.partner}, {"partner_stack", c.partner_stack}, {"digest", c.result->digest},
                     {"partner_digest", c.partner_digest}, {"equal", c.equal()}});
  json diffs = json::array();
  for (const auto& d : m.stack_differences)
    diffs.push_back({{"op", d.op}, {"source", d.source}, {"dtype", d.dtype}, {"math", d.math}, {"config", d.config}, {"variant", d.variant}, {"stack_a", d.stack_a}, {"stack_b", d.stack_b},
                     {"digest_a", d.digest_a}, {"digest_b", d.digest_b}});
  json rows = json::array();
  for (const auto& row : m.rows) {
    json cells = json::array();
    for (std::size_t i = 0; i < row.cells.size(); ++i)
      cells.push_back({{"stack", data.stacks[i].id}, {"status", to_string(row.cells[i].status)}, {"text", row.cells[i].text},
                       {"broken", row.cells[i].broken}, {"configs", row.cells[i].configs}, {"ran_configs", row.cells[i].ran_configs},
                       {"invariance", row.cells[i].invariance.empty() ? json(nullptr) : json(row.cells[i].invariance)}});
    json solution = nullptr;
    if (row.solution >= 0) {
      const Solution& s = m.solutions[static_cast<std::size_t>(row.solution)];
      solution = {{"variant", s.variant}, {"against", s.against}, {"geomean", s.geomean()}, {"min", s.lowest()},
                  {"max", s.highest()}, {"pairs", s.ratios.size()}, {"values_unchecked", s.values_unchecked}};
    }
    rows.push_back({{"source", row.source}, {"op", row.op}, {"dtype", row.dtype}, {"math", row.math}, {"variant", row.variant}, {"role", to_string(row.role)}, {"backend", row.backend},
                    {"claim", row.claim_determinism}, {"cells", cells}, {"solution", solution}});
  }
  json pipelines = json::array();
  for (const auto& p : data.pipelines)
    pipelines.push_back({{"run", p.run_id}, {"pipeline", p.pipeline}, {"setting", p.setting}, {"config", p.config},
                         {"trials", p.trials}, {"distinct", p.distinct}, {"diff", p.diff ? trace_diff_json(*p.diff) : json(nullptr)},
                         {"problem", p.problem.empty() ? json(nullptr) : json(p.problem)}});
  const json report = {{"schema", "d9m.report/1"},
                       {"generator", {{"name", "d9m"}, {"version", d9m_version()}, {"commit", d9m_commit()}}},
                       {"generated_at", data.generated_at},
                       {"store", data.store_path},
                       {"runs", data.runs},
                       {"interrupted_runs", data.interrupted_runs},
                       {"trials_per_case", data.trials_per_case},
                       {"catalog_digests", data.catalog_digests},
                       {"evidence", {{"sha256", data.evidence.digest}, {"manifest_heads", data.evidence.manifest_heads}}},
                       {"selection", data.selection.empty() ? json(nullptr) : json(data.selection)},
                       {"stacks", stacks},
                       {"results", results},
                       {"table", rows},
                       {"costs", costs},
                       {"cross_implementation", cross},
                       {"stack_differences", diffs},
                       {"pipelines", pipelines},
                       {"verdict", verdict_json(m.verdict)}};
  return json_text(report, 2) + "\n";
}

}  // namespace d9m
