// Report renderers: each only formats the status model (model.h) and the evidence it was built
// from (results.h); no renderer derives a cell, a solution or the verdict by itself. Markdown is
// the status table in the shape of NVIDIA's framework-reproducibility table, with a header that
// names every run parameter and a footer with the verdict; HTML the same as one self-contained
// page; JSON the versioned machine interface ("d9m.report/1", consumers ignore unknown fields);
// JUnit one test per case; CSV one row per case.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "harness/report/model.h"
#include "harness/report/results.h"

namespace d9m {

// A report in `format` (md, html, json, junit, csv); `audit` goes with md and html. Anything
// else is Error(usage).
std::string render_report(const ReportData& data, const StatusModel& model, const std::string& format, bool audit);

// What `d9m report` renders from a store: its evidence (of one run, or of some stacks), loaded
// once, the status model built from it, and the report in any format. `d9m attest` renders the
// same to check that the report it signs is the store's.
class StoreReport {
 public:
  StoreReport(const Store& store, const std::optional<std::string>& run_id = std::nullopt, const std::vector<std::string>& stacks = {});
  ReportData& data() { return data_; }  // to set generated_at or store_sha256 before rendering
  const StatusModel& model() const { return model_; }
  std::string render(const std::string& format, bool audit);

 private:
  const Store& store_;
  ReportData data_;
  std::optional<std::vector<PipelineTrace>> pipelines_;
  StatusModel model_;
};

// `audit` adds what a regulated filing needs: identification (tool, store SHA-256, catalogue),
// the procedure, the acceptance criteria, every run, the full fingerprints and every anomaly.
std::string render_markdown(const ReportData& data, const StatusModel& model, bool audit = false);
std::string render_html(const ReportData& data, const StatusModel& model, bool audit = false);
std::string render_json(const ReportData& data, const StatusModel& model);
std::string render_junit(const ReportData& data, const StatusModel& model);
std::string render_csv(const ReportData& data, const StatusModel& model);

// The header every text format shares: every run parameter, one per line.
std::string report_header(const ReportData& data);
// A pipeline case of data.pipelines in one line: "bias_fit (setting flip, 3_steps, run 0123456789ab
// on S1): 2 trajectories in 3 trials", or "...: one trajectory in 3 trials, no divergence".
std::string pipeline_summary(const ReportData& data, const PipelineTrace& p);
// The audit sections, as Markdown and as HTML.
std::string audit_sections_md(const ReportData& data, const StatusModel& model);
std::string audit_sections_html(const ReportData& data, const StatusModel& model);

}  // namespace d9m
