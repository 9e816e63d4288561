// Report renderers. Markdown is the status table in the shape of NVIDIA's framework-
// reproducibility table, with a header that names every run parameter and a footer with the
// verdict; JSON is the versioned machine interface ("d9m.report/1", consumers ignore unknown
// fields).
#pragma once
#include <string>

#include "harness/report/results.h"

namespace d9m {

// `audit` adds what a regulated filing needs: identification (tool, store SHA-256, catalogue),
// the procedure, the acceptance criteria, every run, the full fingerprints and every anomaly.
std::string render_markdown(const ReportData& data, bool audit = false);
std::string render_html(const ReportData& data, bool audit = false);

// The header every format shares: every run parameter, one per line.
std::string report_header(const ReportData& data);
// The audit sections, as Markdown and as HTML.
std::string audit_sections_md(const ReportData& data);
std::string audit_sections_html(const ReportData& data);
std::string render_json(const ReportData& data);
std::string render_junit(const ReportData& data);
std::string render_csv(const ReportData& data);

struct Verdict {
  std::int64_t cases = 0, by_status[5] = {};
  std::vector<std::string> broken;  // "op/config/variant on S1: k distinct digests in N trials"
  std::vector<std::string> warnings;  // e.g. a nondeterministic control that never diverged
  bool held() const { return broken.empty(); }
};
Verdict verdict_of(const ReportData& data);

}  // namespace d9m
