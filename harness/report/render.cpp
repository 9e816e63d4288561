#include "harness/core/error.h"
#include "harness/report/compare.h"
#include "harness/report/report.h"
#include "harness/report/trace_diff.h"

namespace d9m {

std::string render_report(const ReportData& data, const StatusModel& model, const std::string& format, bool audit) {
  if (audit && format != "md" && format != "html") fail_usage("--audit goes with --format md or html");
  if (format == "md") return render_markdown(data, model, audit);
  if (format == "html") return render_html(data, model, audit);
  if (format == "json") return render_json(data, model);
  if (format == "junit") return render_junit(data, model);
  if (format == "csv") return render_csv(data, model);
  fail_usage("--format must be md, html, json, junit or csv, got '" + format + "'");
}

StoreReport::StoreReport(const Store& store, const std::optional<std::string>& run_id, const std::vector<std::string>& stacks)
    : store_(store), data_(load_report_data(store, run_id)) {
  if (run_id && data_.runs == 0) fail_usage("--run " + *run_id + ": no such run in " + store.path());
  select_stacks(data_, stacks);
  model_ = build_status_model(data_);
}

std::string StoreReport::render(const std::string& format, bool audit) {
  // The pipelines' traces go into the formats that show them (JUnit and CSV have a row per case),
  // read once, from the reported runs: those of the selected stacks.
  const bool traced = format == "md" || format == "html" || format == "json";
  if (traced && !pipelines_) {
    std::vector<std::string> runs;
    for (const auto& r : data_.run_rows)
      if (data_.reports_stack(r.stack)) runs.push_back(r.id);
    pipelines_ = pipeline_traces(store_, runs);
  }
  data_.pipelines = traced ? *pipelines_ : std::vector<PipelineTrace>{};
  return render_report(data_, model_, format, audit);
}

}  // namespace d9m
