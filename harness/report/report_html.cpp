// The HTML report: one self-contained file (inline CSS, SVG and script; nothing loaded from
// anywhere, so it works from file:// and in an archive). A heatmap of source x stack, the cost
// of determinism as a bar chart, each diverged pipeline's source and divergence chart (trace_diff.h), and every case in a table that sorts and filters in place.
// Every string from the store goes through xml_escape.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "harness/core/escape.h"
#include "harness/core/fingerprint.h"
#include "harness/report/format.h"
#include "harness/report/report.h"

namespace d9m {

namespace {

using format::num;
using format::ratio;

const char* status_class(Status s) {
  switch (s) {
    case Status::deterministic: return "d";
    case Status::nondeterministic: return "nd";
    case Status::error: return "e";
    case Status::unsupported: return "u";
    case Status::skipped: return "s";
  }
  return "s";
}

const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1b1f24;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{font:12px/1.5 ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;border:1px solid #d0d7de;padding:8px 12px;white-space:pre-wrap}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa;cursor:pointer;user-select:none}th.sorted-asc::after{content:" \25B2"}th.sorted-desc::after{content:" \25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}
.ro{background:#fff1c2}.d{background:#dafbe1}.nd{background:#ffd8d3}.e{background:#ffebe9;color:#a40e26;font-weight:600}.u{background:#eaeef2}.s{background:#fff}
.broken{outline:3px solid #cf222e;outline-offset:-3px;font-weight:700}
.verdict{font-size:16px;font-weight:700;padding:10px 14px;border-radius:6px;display:inline-block}
.ok{background:#dafbe1;color:#116329}.bad{background:#ffebe9;color:#a40e26}
#filter{font-size:14px;padding:4px 8px;width:340px;margin:4px 0 8px}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border:1px solid #d0d7de}
svg text{font:12px system-ui,sans-serif}
.src{background:#ffebe9;padding:6px 10px}figure{margin:8px 0}
@media print{body{margin:0;max-width:none}#filter,.noprint{display:none}h2{break-after:avoid}tr,svg{break-inside:avoid}
 th{cursor:auto}a{color:inherit;text-decoration:none}@page{size:A4 landscape;margin:12mm}}
)css";

// Sorting by clicking a header (numbers numerically), filtering rows by any text in them.
const char* kScript = R"js(
(function(){
  var table=document.getElementById('cases'); if(!table) return;
  var body=table.tBodies[0];
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,col){
    th.addEventListener('click',function(){
      var asc=!th.classList.contains('sorted-asc');
      Array.prototype.forEach.call(table.tHead.rows[0].cells,function(h){h.classList.remove('sorted-asc','sorted-desc');});
      th.classList.add(asc?'sorted-asc':'sorted-desc');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[col].getAttribute('data-v')||a.cells[col].textContent, y=b.cells[col].getAttribute('data-v')||b.cells[col].textContent;
        var nx=parseFloat(x), ny=parseFloat(y), c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
  // Free text, and the library, dtype and status each rendered as a row attribute.
  var f=document.getElementById('filter'), picks=['library','dtype','status'].map(function(k){return document.getElementById('pick-'+k);});
  function apply(){
    var terms=f.value.toLowerCase().split(/\s+/).filter(Boolean);
    Array.prototype.forEach.call(body.rows,function(r){
      var t=r.textContent.toLowerCase();
      var ok=terms.every(function(w){return t.indexOf(w)>=0;})&&picks.every(function(p){return !p||!p.value||r.getAttribute('data-'+p.id.slice(5))===p.value;});
      r.style.display=ok?'':'none';});
  }
  f.addEventListener('input',apply);
  picks.forEach(function(p){if(p)p.addEventListener('change',apply);});
})();
)js";


void verdict_block(std::ostringstream& o, const Verdict& verdict) {
  o << "<p><span class=\"verdict "
    << (verdict.certifies_nothing() ? "bad\">NO EVIDENCE: no claim was tested" : verdict.held() ? "ok\">PASS: every claim held" : "bad\">FAIL")
    << "</span> &nbsp; " << verdict.cases << " cases: " << verdict.by_status[0] << " deterministic, " << verdict.by_status[1]
    << " nondeterministic, " << verdict.by_status[2] << " errors, " << verdict.by_status[3] << " unsupported, "
    << verdict.by_status[4] << " skipped</p>\n";
  if (!verdict.held()) {
    o << "<ul>";
    for (const auto& f : verdict.failures) o << "<li class=\"e\">" << xml_escape(to_string(f.kind) + ": " + f.text) << "</li>";
    o << "</ul>\n";
  }
  for (const auto& w : verdict.warnings) o << "<p class=\"e\">WARNING: " << xml_escape(w) << "</p>\n";
}

// Rows op/variant, columns stacks; each cell as the model sums it up over the configs.
void heatmap(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  const int row_h = 20, label_w = 330, col_w = 110, top = 26;
  const int width = label_w + col_w * static_cast<int>(std::max<std::size_t>(data.stacks.size(), 1)) + 10;
  const int height = top + row_h * static_cast<int>(m.rows.size()) + 6;
  o << "<h2>Status by source</h2>\n<div class=\"legend\"><span class=\"d\">D deterministic</span><span class=\"nd\">ND k/N "
       "nondeterministic</span><span class=\"e\">E error</span><span class=\"u\">U unsupported</span><span class=\"s\">- not run "
       "or skipped</span><span class=\"broken\">claim broken</span></div>\n";
  o << "<svg role=\"img\" aria-label=\"status heatmap\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " "
    << height << "\">\n";
  for (std::size_t j = 0; j < data.stacks.size(); ++j)
    o << "<text x=\"" << label_w + static_cast<int>(j) * col_w + col_w / 2 << "\" y=\"16\" text-anchor=\"middle\" font-weight=\"600\">"
      << xml_escape(data.stacks[j].label) << "</text>\n";
  static const std::map<std::string, std::string> fill = {{"d", "#4ac26b"}, {"nd", "#fa4549"}, {"e", "#8c0f24"}, {"u", "#afb8c1"}, {"s", "#f6f8fa"}};
  int row_index = 0;
  for (const auto& row : m.rows) {
    const int y = top + row_index * row_h;
    o << "<text x=\"4\" y=\"" << y + 14 << "\">" << xml_escape(row.source + "  " + row.variant) << "</text>\n";
    for (std::size_t j = 0; j < row.cells.size(); ++j) {
      const StatusCell& c = row.cells[j];
      const std::string cls = c.configs ? status_class(c.status) : "s";
      const std::string title = c.configs ? std::to_string(c.configs) + " configs" +
                                                (c.ran_configs < c.configs ? ", " + std::to_string(c.ran_configs) + " with evidence (D or ND)" : "") +
                                                (c.nd_configs ? ", " + std::to_string(c.nd_configs) + " nondeterministic" : "") +
                                                (c.broken ? ", claim broken" : "")
                                          : "not run";
      const int x = label_w + static_cast<int>(j) * col_w;
      o << "<g><title>" << xml_escape(row.source + " " + row.variant + " on " + data.stacks[j].label + ": " + title) << "</title>"
        << "<rect x=\"" << x + 2 << "\" y=\"" << y + 2 << "\" width=\"" << col_w - 4 << "\" height=\"" << row_h - 3 << "\" fill=\""
        << fill.at(cls) << "\"" << (c.broken ? " stroke=\"#1b1f24\" stroke-width=\"3\"" : " stroke=\"#d0d7de\"") << "/>"
        << "<text x=\"" << x + col_w / 2 << "\" y=\"" << y + 15 << "\" text-anchor=\"middle\" fill=\""
        << (cls == "nd" || cls == "e" ? "#fff" : "#1b1f24") << "\">" << xml_escape(c.text) << "</text></g>\n";
    }
    ++row_index;
  }
  o << "</svg>\n";
}

const char* invariance_class(const std::string& s) {
  if (s == "Supported") return "d";
  if (s == "Replay only") return "ro";
  if (s == "Not guaranteed") return "nd";
  return "u";
}

// cuDNN's "Determinism support" view: per library API, stack and dtype, both properties.
void html_api_view(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  if (m.api.rows.empty()) return;
  o << "<h2>By library API, stack and dtype</h2>\n<p>The view of cuDNN's \"Determinism support\" page, from evidence: "
       "repeatability, then batch invariance where a config asked for it.</p>\n<table><thead><tr><th>library</th><th>API</th><th>claim</th>";
  for (const auto& s : data.stacks)
    for (const auto& d : m.api.dtypes) o << "<th>" << xml_escape(s.label + " " + d) << "</th>";
  o << "</tr></thead><tbody>\n";
  for (const auto& r : m.api.rows) {
    o << "<tr><td>" << xml_escape(r.library) << "</td><td>" << xml_escape(r.op + (r.math == "default" ? "" : " " + r.math) + " " + r.variant)
      << "</td><td>" << xml_escape(r.claim) << "</td>";
    for (std::size_t s = 0; s < data.stacks.size(); ++s)
      for (const auto& d : m.api.dtypes) {
        auto it = r.cells.find({s, d});
        if (it == r.cells.end()) {
          o << "<td class=\"s\">-</td>";
          continue;
        }
        const auto& c = it->second;
        o << "<td class=\"" << (c.repeatability.rfind("ND", 0) == 0 ? "nd" : c.repeatability == "D" ? "d" : "u") << "\">"
          << xml_escape(c.repeatability);
        if (!c.invariance.empty())
          o << "<br><span class=\"" << invariance_class(c.invariance) << "\">" << xml_escape(c.invariance) << "</span>";
        o << "</td>";
      }
    o << "</tr>\n";
  }
  o << "</tbody></table>\n";
}

// The solutions' costs, the same numbers as the Markdown footnotes: log-scaled bars around 1x.
void cost_chart(std::ostringstream& o, const StatusModel& m) {
  if (m.solutions.empty()) return;
  const int bar_h = 18, lw = 300, axis_w = 420, h = 30 + bar_h * static_cast<int>(m.solutions.size());
  const double lo = std::log2(1.0 / 16), hi = std::log2(16.0);
  auto xpos = [&](double ratio) {
    const double l = std::min(hi, std::max(lo, std::log2(ratio)));
    return lw + static_cast<int>((l - lo) / (hi - lo) * axis_w);
  };
  o << "<h2>Cost of determinism</h2>\n<p>Median time of the deterministic variant over the median of the fastest nondeterministic one "
       "(geometric mean over every config and stack where the solution ran beside a nondeterministic variant, as in the "
       "Markdown and JSON; log scale, 1x in the middle).</p>\n";
  o << "<svg role=\"img\" aria-label=\"cost of determinism\" width=\"" << lw + axis_w + 90 << "\" height=\"" << h << "\">\n";
  for (double t : {1.0 / 16, 1.0 / 4, 1.0, 4.0, 16.0})
    o << "<line x1=\"" << xpos(t) << "\" y1=\"14\" x2=\"" << xpos(t) << "\" y2=\"" << h << "\" stroke=\"#d0d7de\"/><text x=\"" << xpos(t)
      << "\" y=\"11\" text-anchor=\"middle\">" << num(t < 1 ? "%.3gx" : "%.0fx", t) << "</text>\n";
  int i = 0;
  for (const auto& s : m.solutions) {
    const double g = s.geomean();
    const int y = 20 + i * bar_h, x1 = std::min(xpos(1.0), xpos(g)), x2 = std::max(xpos(1.0), xpos(g));
    o << "<g><title>" << xml_escape(s.source + " (" + s.backend + "): " + s.variant + " vs " + s.against + ", " + ratio(g) + " over " +
                                    std::to_string(s.ratios.size()) + (s.ratios.size() == 1 ? " config-stack pair" : " config-stack pairs") +
                                    (s.values_unchecked ? ", values unchecked on " + std::to_string(s.values_unchecked) : ""))
      << "</title><text x=\"4\" y=\"" << y + 13 << "\">" << xml_escape(s.source + " (" + s.backend + ")") << "</text><rect x=\"" << x1
      << "\" y=\"" << y + 2 << "\" width=\"" << std::max(x2 - x1, 1) << "\" height=\"" << bar_h - 5 << "\" fill=\""
      << (g > 1 ? "#bf8700" : "#2da44e") << "\"/><text x=\"" << x2 + 4 << "\" y=\"" << y + 13 << "\">" << ratio(g) << "</text></g>\n";
    ++i;
  }
  o << "</svg>\n";
}

// Each pipeline case of the reported runs: where its trials' trajectories diverged, the source
// (the first op with bit-equal inputs and a differing output) and the divergence chart by step
// of trial 0 against the first trial that differs, as `d9m trace diff --format html` draws it.
void html_pipelines(std::ostringstream& o, const ReportData& data) {
  if (data.pipelines.empty()) return;
  o << "<h2>Pipelines and traced programs</h2>\n<p>A pipeline's trial, or a traced program's, is its whole trajectory (every op output of every step). Where trials diverged: "
       "trial 0 against the first trial that differs, op by op; <code>d9m trace diff</code> prints the table.</p>\n";
  std::string agreed;
  for (const auto& p : data.pipelines) {
    if (p.distinct <= 1) {
      agreed += "<li>" + xml_escape(pipeline_summary(data, p)) + "</li>";
      continue;
    }
    const bool program = p.pipeline.rfind("exec:", 0) == 0;
    o << "<section class=\"trace\"><h3>" << (program ? "program " : "pipeline ") << xml_escape(pipeline_summary(data, p)) << "</h3>\n";
    if (p.diff) {
      o << "<p>trial " << p.diff->a.trial << " against trial " << p.diff->b.trial << ":</p>\n<p class=\"src\">"
        << trace_source_html(*p.diff) << "</p>\n<figure>" << trace_chart_svg(*p.diff)
        << "<figcaption>Divergence by step (log scale)</figcaption></figure>\n";
      for (const auto& n : p.diff->notes) o << "<p><i>Note: " << xml_escape(n) << ".</i></p>\n";
    } else {
      o << "<p class=\"e\">The traces do not compare: " << xml_escape(p.problem) << "</p>\n";
    }
    o << "</section>\n";
  }
  if (!agreed.empty()) o << "<ul>" << agreed << "</ul>\n";
}

}  // namespace

std::string render_html(const ReportData& data, const StatusModel& m, bool audit) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>d9m determinism "
    << (audit ? "audit" : "status") << "</title>\n<style>" << kStyle << "</style></head><body>\n";
  o << "<h1>d9m determinism " << (audit ? "audit report" : "status") << "</h1>\n";
  o << "<div class=\"meta\">" << xml_escape(report_header(data)) << "</div>\n";
  verdict_block(o, m.verdict);
  if (audit) o << audit_sections_html(data, m);

  o << "<h2>Stacks</h2>\n<table><thead><tr><th>stack</th><th>fingerprint</th><th>runs</th><th>hosts</th><th>contents</th></tr></thead><tbody>\n";
  for (const auto& s : data.stacks)
    o << "<tr><td>" << xml_escape(s.label) << "</td><td><code>" << xml_escape(s.id.substr(0, 16)) << "</code></td><td class=\"num\">"
      << s.runs << "</td><td>" << xml_escape(format::join(s.hosts, ", ")) << "</td><td>" << xml_escape(s.summary()) << "</td></tr>\n";
  o << "</tbody></table>\n";
  heatmap(o, data, m);
  html_api_view(o, data, m);
  cost_chart(o, m);
  html_pipelines(o, data);

  if (!m.stack_differences.empty()) {
    o << "<h2>Stack-to-stack differences</h2>\n<table><thead><tr><th>op</th><th>config</th><th>variant</th><th>stacks</th><th>digests</th></tr></thead><tbody>\n";
    for (const auto& d : m.stack_differences)
      o << "<tr><td>" << xml_escape(d.source) << "</td><td>" << xml_escape(d.config) << "</td><td>" << xml_escape(d.variant) << "</td><td>"
        << xml_escape(data.stack(d.stack_a).label + " vs " + data.stack(d.stack_b).label) << "</td><td><code>" << xml_escape(d.digest_a)
        << "</code><br><code>" << xml_escape(d.digest_b) << "</code></td></tr>\n";
    o << "</tbody></table>\n";
  }

  // Every case.
  // The filters' choices: every library, dtype and status that some case has.
  std::set<std::string> libraries, dtypes, statuses;
  for (const auto& r : data.results) {
    libraries.insert(library_of(r.variant));
    dtypes.insert(r.dtype);
    statuses.insert(to_string(r.status));
  }
  auto pick = [&](const std::string& what, const std::set<std::string>& options) {
    o << "<select id=\"pick-" << what << "\" class=\"noprint\"><option value=\"\">every " << what << "</option>";
    for (const auto& v : options) o << "<option>" << xml_escape(v) << "</option>";
    o << "</select> ";
  };
  o << "<h2>Cases</h2>\n<input id=\"filter\" class=\"noprint\" type=\"search\" placeholder=\"filter: e.g. scatter cuda nondet\"> ";
  pick("library", libraries);
  pick("dtype", dtypes);
  pick("status", statuses);
  o << "\n<table id=\"cases\"><thead><tr><th>op</th><th>config</th><th>variant</th><th>library</th><th>dtype</th><th>stack</th><th>status</th>"
       "<th>batch</th><th>values</th><th>trials</th><th>distinct</th>"
       "<th>95% bound</th><th>median us</th><th>min us</th><th>worst diff (ULP)</th><th>claim</th><th>digest</th></tr></thead><tbody>\n";
  for (const auto& r : data.results) {
    const std::string bound = r.status == Status::deterministic ? num("%.4g", r.bound95()) : "";
    const std::string library = library_of(r.variant), inv = r.invariance_status();
    o << "<tr data-library=\"" << xml_escape(library) << "\" data-dtype=\"" << xml_escape(r.dtype) << "\" data-status=\""
      << to_string(r.status) << "\"><td>" << xml_escape(r.source()) << "</td><td title=\"" << xml_escape(r.params) << "\">" << xml_escape(r.config) << "</td><td>"
      << xml_escape(r.variant) << "</td><td>" << xml_escape(library) << "</td><td>" << xml_escape(r.dtype) << "</td><td>"
      << xml_escape(data.stack(r.stack).label) << "</td><td class=\"" << status_class(r.status)
      << (m.verdict.claim_failed(r) ? " broken" : "") << "\" title=\"" << xml_escape(r.detail) << "\">" << to_string(r.status) << "</td><td"
      << (inv.empty() ? "" : std::string(" class=\"") + invariance_class(inv) + "\"") << ">" << xml_escape(inv) << "</td><td" << (r.values_wrong() ? " class=\"broken\"" : "") << " title=\""
      << xml_escape(format::values_text(r.values)) << "\">" << (r.values ? to_string(r.values->outcome) : "") << "</td><td class=\"num\">"
      << r.trials << "</td><td class=\"num\">" << r.distinct << "</td><td class=\"num\">" << bound << "</td><td class=\"num\">"
      << (r.median_ns ? num("%.2f", static_cast<double>(*r.median_ns) / 1e3) : "") << "</td><td class=\"num\">"
      << (r.min_ns ? num("%.2f", static_cast<double>(*r.min_ns) / 1e3) : "") << "</td><td class=\"num\">"
      << (r.worst_diff ? std::to_string(r.worst_diff->max_ulp) : "") << "</td><td title=\"" << xml_escape(r.claim_reason) << "\">"
      << xml_escape(r.claim_determinism + " (" + r.claim_source + ")") << "</td><td><code>" << xml_escape(r.digest.substr(0, 16))
      << "</code></td></tr>\n";
  }
  o << "</tbody></table>\n<p class=\"meta\">" << xml_escape("generated by d9m " + d9m_version() + " (" + d9m_commit() + ") at " + data.generated_at)
    << "</p>\n<script>" << kScript << "</script>\n</body></html>\n";
  return o.str();
}

}  // namespace d9m
