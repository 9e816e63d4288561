// The Markdown report: the status table in the shape of NVIDIA's framework-reproducibility
// table (rows op and variant, columns stacks, a solution column keyed to footnotes), then the
// cross-implementation checks, stack-to-stack differences, every case, and the verdict.
#include <map>
#include <sstream>
#include <tuple>

#include "harness/report/format.h"
#include "harness/report/report.h"

namespace d9m {

namespace {

using format::md_cell;

void status_table(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  o << "\n## Status by source\n\n| source | variant | claim |";
  for (const auto& s : data.stacks) o << " " << s.label << " |";
  o << " solution |\n|---|---|---|";
  for (std::size_t i = 0; i < data.stacks.size(); ++i) o << "---|";
  o << "---|\n";
  for (const auto& row : m.rows) {
    o << "| " << row.source << " | " << row.variant << " | " << format::short_claim(row.claim_determinism, row.claim_source) << " |";
    for (const auto& c : row.cells) o << " " << (c.broken ? "**" + c.text + "** (claim broken)" : c.text) << " |";
    std::string solution;
    if (row.claim_determinism == "nondeterministic") {
      if (row.solution < 0) {
        solution = "none measured";
      } else {
        const Solution& s = m.solutions[static_cast<std::size_t>(row.solution)];
        solution = "use " + s.variant + ", " + format::num("%.2fx", s.geomean()) + " [" + s.key + "]";
      }
    }
    o << " " << solution << " |\n";
  }
  o << "\nKey: `D` one output digest in every trial of every config; `ND k/N` k distinct digests in N trials "
       "(worst config; \"m of n configs\" when not every config diverged); `E` error; `U` the variant does not support the "
       "config; `-` not run (or skipped) on that stack. Claim: what the variant is expected to be and who says so (design, "
       "vendor-doc, vendor-api).\n\n";
  for (const auto& s : m.solutions)
    o << "- [" << s.key << "] **" << s.source << "** (" << s.backend << "): " << s.variant << " (" << s.reason
      << "). Cost: median time of " << s.variant << " over the median of the fastest nondeterministic variant (" << s.against
      << "), geometric mean " << format::num("%.2fx", s.geomean()) << " over " << s.ratios.size()
      << " config-stack pairs, range " << format::num("%.2fx", s.lowest()) << "-" << format::num("%.2fx", s.highest()) << ".\n";
}

void cross_implementation(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  if (m.cross.empty()) return;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::pair<int, int>> agg;  // equal / checked
  for (const auto& c : m.cross) {
    auto& [eq, n] = agg[{c.result->source(), c.result->variant, c.partner, c.result->stack}];
    eq += c.equal();
    ++n;
  }
  o << "\n## Cross-implementation\n\nVariants that claim the bits of another implementation, checked on the same "
       "config, inputs and stack wherever both were deterministic.\n\n| op | variant | claims the bits of | stack | "
       "configs equal |\n|---|---|---|---|---|\n";
  for (const auto& [k, v] : agg) {
    const bool all = v.first == v.second;
    o << "| " << std::get<0>(k) << " | " << std::get<1>(k) << " | " << std::get<2>(k) << " | " << data.stack(std::get<3>(k)).label
      << " | " << (all ? "" : "**") << v.first << " of " << v.second << (all ? "" : "** (claim broken)") << " |\n";
  }
}

void stack_differences(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  if (m.stack_differences.empty()) return;
  o << "\n## Stack-to-stack differences\n\nDeterministic on each stack, but a different output on the same inputs: "
       "reproducible run to run, not stack to stack.\n\n| op | config | variant | stacks | digests |\n|---|---|---|---|---|\n";
  for (const auto& d : m.stack_differences)
    o << "| " << d.op << " | " << md_cell(d.config) << " | " << d.variant << " | " << data.stack(d.stack_a).label << " vs "
      << data.stack(d.stack_b).label << " | `" << d.digest_a.substr(0, 12) << "` vs `" << d.digest_b.substr(0, 12) << "` |\n";
}

void cases(std::ostringstream& o, const ReportData& data) {
  o << "\n## Cases\n\n| op | config | variant | stack | status | trials | distinct | 95% bound | median | min | worst diff |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.results) {
    std::string diff = "-";
    if (r.worst_diff)
      diff = std::to_string(r.worst_diff->count) + " elems, " + std::to_string(r.worst_diff->max_ulp) + " ULP, " +
             format::num("%.3g", r.worst_diff->max_abs) + " abs";
    const std::string st = to_string(r.status) + (r.detail.empty() ? "" : " (" + r.detail + ")");
    o << "| " << r.source() << " | " << md_cell(r.config) << " | " << r.variant << " | " << data.stack(r.stack).label << " | "
      << md_cell(st) << " | " << r.trials << " | " << r.distinct << " | "
      << (r.status == Status::deterministic ? format::num("< %.3g", r.bound95()) : "-") << " | "
      << format::duration(r.median_ns) << " | " << format::duration(r.min_ns) << " | " << diff << " |\n";
  }
}

}  // namespace

std::string render_markdown(const ReportData& data, const StatusModel& model, bool audit) {
  std::ostringstream o;
  o << "# d9m determinism " << (audit ? "audit report" : "status") << "\n\n```\n" << report_header(data) << "```\n\n";
  if (audit) o << audit_sections_md(data, model);
  o << "## Stacks\n\n| stack | fingerprint | runs | hosts | stack contents |\n|---|---|---|---|---|\n";
  for (const auto& s : data.stacks)
    o << "| " << s.label << " | `" << s.id.substr(0, 12) << "` | " << s.runs << " | " << md_cell(format::join(s.hosts, ", "))
      << " | " << md_cell(s.summary()) << " |\n";
  status_table(o, data, model);
  cross_implementation(o, data, model);
  stack_differences(o, data, model);
  cases(o, data);
  o << "\n## Verdict\n\n```\n";
  for (const auto& line : model.verdict.lines()) o << "# " << line << "\n";
  o << "```\n";
  return o.str();
}

}  // namespace d9m
