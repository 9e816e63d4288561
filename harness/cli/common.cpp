#include "harness/cli/common.h"

#include <iostream>

#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/report/report.h"

namespace d9m::cli {

Catalog load_catalog(const std::string& path, const std::string& profile) {
  return path.empty() ? builtin_catalog(profile, Registry::global()) : load_catalog_file(path, Registry::global());
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  write_file_atomically(path, text);
}

void check_output(const std::string& path) {
  if (!path.empty() && path != "-") check_output_file(path);
}

std::string render(const ReportData& data, const StatusModel& model, const std::string& format, bool audit) {
  if (audit && format != "md" && format != "html") fail_usage("--audit goes with --format md or html");
  if (format == "md") return render_markdown(data, model, audit);
  if (format == "html") return render_html(data, model, audit);
  if (format == "json") return render_json(data, model);
  if (format == "junit") return render_junit(data, model);
  if (format == "csv") return render_csv(data, model);
  fail_usage("--format must be md, html, json, junit or csv, got '" + format + "'");
}

}  // namespace d9m::cli
