// Report renderers. Markdown is the status table in the shape of NVIDIA's framework-
// reproducibility table, with a header that names every run parameter and a footer with the
// verdict; JSON is the versioned machine interface ("d9m.report/1", consumers ignore unknown
// fields).
#pragma once
#include <string>

#include "harness/results.h"

namespace d9m {

std::string render_markdown(const ReportData& data);
std::string render_json(const ReportData& data);

struct Verdict {
  std::int64_t cases = 0, by_status[5] = {};
  std::vector<std::string> broken;  // "op/config/variant on S1: k distinct digests in N trials"
  bool held() const { return broken.empty(); }
};
Verdict verdict_of(const ReportData& data);

}  // namespace d9m
