// Report renderers: each only formats the status model (model.h) and the evidence it was built
// from (results.h); no renderer derives a cell, a solution or the verdict by itself. Markdown is
// the status table in the shape of NVIDIA's framework-reproducibility table, with a header that
// names every run parameter and a footer with the verdict; HTML the same as one self-contained
// page; JSON the versioned machine interface ("d9m.report/1", consumers ignore unknown fields);
// JUnit one test per case; CSV one row per case.
#pragma once
#include <string>

#include "harness/report/model.h"
#include "harness/report/results.h"

namespace d9m {

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
