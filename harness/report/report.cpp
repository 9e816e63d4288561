#include "harness/report/report.h"
#include "harness/core/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "harness/report/compare.h"
#include "harness/core/digest.h"
#include "harness/core/escape.h"
#include "harness/core/fingerprint.h"

namespace d9m {

using nlohmann::json;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string duration(std::optional<std::int64_t> ns) {
  if (!ns) return "-";
  const double v = static_cast<double>(*ns);
  if (v < 1e3) return fmt("%.0f ns", v);
  if (v < 1e6) return fmt("%.1f us", v / 1e3);
  if (v < 1e9) return fmt("%.2f ms", v / 1e6);
  return fmt("%.2f s", v / 1e9);
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

template <class T> std::string join_num(const std::vector<T>& v) {
  std::vector<std::string> s;
  for (auto x : v) s.push_back(std::to_string(x));
  return join(s, ", ");
}

// Markdown table cells must not break the table.
std::string cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string short_claim(const std::string& determinism, const std::string& source) {
  const std::string d = determinism == "deterministic" ? "D" : determinism == "nondeterministic" ? "ND" : "?";
  return d + " (" + source + ")";
}

// One cell of the status table: the worst over the configs of one op and variant on one stack.
std::string status_cell(const std::vector<const CaseResult*>& rs) {
  if (rs.empty()) return "-";
  bool any_error = false, any_d = false, any_u = false, broken = false;
  const CaseResult* worst_nd = nullptr;
  std::size_t nd_configs = 0;
  for (const auto* r : rs) {
    nd_configs += r->status == Status::nondeterministic;
    any_error |= r->status == Status::error;
    any_d |= r->status == Status::deterministic;
    any_u |= r->status == Status::unsupported;
    broken |= r->claim_broken();
    if (r->status == Status::nondeterministic && (!worst_nd || r->distinct > worst_nd->distinct)) worst_nd = r;
  }
  std::string c;
  if (any_error) c = "E";
  else if (worst_nd) {
    c = "ND " + std::to_string(worst_nd->distinct) + "/" + std::to_string(worst_nd->trials);
    if (nd_configs < rs.size()) c += " (" + std::to_string(nd_configs) + " of " + std::to_string(rs.size()) + " configs)";
  }
  else if (any_d) c = "D";
  else if (any_u) c = "U";
  else c = "-";
  return broken ? "**" + c + "** (claim broken)" : c;
}

struct Solution {
  std::string variant, reason, against;
  std::vector<double> ratios;
  double geomean() const {
    double s = 0;
    for (double r : ratios) s += std::log(r);
    return std::exp(s / static_cast<double>(ratios.size()));
  }
};

// "9.14.0" -> {9, 14, 0}; empty when the text is not a dotted version.
std::vector<long> version_parts(const nlohmann::json& v) {
  std::vector<long> parts;
  if (!v.is_string()) return parts;
  const std::string text = v.get<std::string>();
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t dot = std::min(text.find('.', at), text.size());
    const std::string part = text.substr(at, dot - at);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9) return {};
    parts.push_back(std::stol(part));
    at = dot + 1;
  }
  return parts;
}

// cuDNN's compatibility rule: a library runs programs built against the same major version and
// the same or an older minor one; anything else is not guaranteed to work ("Compatibility" in
// cuDNN's developer guide). A stack outside it still ran, and its results are what it gave.
std::optional<std::string> cudnn_mismatch(const StackInfo& s) {
  if (!s.fingerprint.is_object() || !s.fingerprint.contains("cuda") || !s.fingerprint["cuda"].is_object()) return std::nullopt;
  const auto& cuda = s.fingerprint["cuda"];
  const auto loaded = version_parts(cuda.value("cudnn_loaded", nlohmann::json()));
  const auto compiled = version_parts(cuda.value("cudnn_compiled", nlohmann::json()));
  if (loaded.size() < 2 || compiled.size() < 2) return std::nullopt;
  if (loaded[0] == compiled[0] && loaded[1] >= compiled[1]) return std::nullopt;
  return "cuDNN " + cuda["cudnn_loaded"].get<std::string>() + " was loaded on " + s.label + " by a d9m built against " +
         cuda["cudnn_compiled"].get<std::string>() +
         ": cuDNN guarantees only the same major and the same or a newer minor version, so its cuDNN cases ran on an "
         "unsupported combination";
}

}  // namespace

Verdict verdict_of(const ReportData& data) {
  Verdict v;
  for (const auto& r : data.results) {
    ++v.cases;
    ++v.by_status[static_cast<int>(r.status)];
    if (r.claim_broken())
      v.broken.push_back(r.op + "/" + r.config + "/" + r.variant + " on " + data.stack(r.stack).label + ": " +
                         std::to_string(r.distinct) + " distinct digests in " + std::to_string(r.trials) + " trials");
  }
  // The controls: a diverging deterministic control is already a broken claim (named above); a
  // nondeterministic control that never diverged means this audit could not have seen
  // nondeterminism on that backend (one thread, a quiet machine, a scheduler that serialised).
  for (const auto& r : data.results) {
    if (r.config != "_canary") continue;
    const std::string where = r.variant + " on " + data.stack(r.stack).label;
    if (r.claim_determinism == "nondeterministic" && r.status == Status::deterministic)
      v.warnings.push_back("the nondeterministic control (" + where + ") never diverged in " + std::to_string(r.trials) +
                           " trials: this audit could not have seen nondeterminism on that backend (one thread?)");
    if (r.claim_determinism == "deterministic" && r.status == Status::nondeterministic)
      v.broken.push_back("the deterministic control (" + where + ") diverged: this stack does not reproduce even a serial sum");
  }
  for (const auto& s : data.stacks)
    if (auto why = cudnn_mismatch(s)) v.warnings.push_back(*why);
  for (const auto& c : cross_checks(data))
    if (!c.equal())
      v.broken.push_back(c.op + "/" + c.config + "/" + c.variant + " on " + data.stack(c.stack).label +
                         ": claims the bits of " + c.partner + ", digests differ");
  return v;
}

std::string report_header(const ReportData& data) {
  std::ostringstream o;
  const std::int64_t n_min = data.trials_per_case.empty() ? 0 : data.trials_per_case.front();
  o << "# d9m " << d9m_version() << " (" << d9m_commit() << "), report generated " << data.generated_at << "\n";
  o << "# store: " << data.store_path << "   runs: " << data.runs << " (" << data.interrupted_runs << " interrupted)   stacks: "
    << data.stacks.size() << "\n";
  o << "# trials per case: " << join_num(data.trials_per_case) << "   threads: " << join_num(data.threads)
    << "   d9m versions: " << join(data.d9m_versions, ", ") << "\n";
  o << "# catalogue sha256: " << join(data.catalog_digests, ", ") << "\n";
  o << "# evidence sha256: " << data.evidence.digest << "   manifest heads: "
    << (data.evidence.manifest_heads.empty() ? "none (a store older than schema 3)" : join(data.evidence.manifest_heads, ", ")) << "\n";
  if (n_min >= 2)
    o << "# D means one digest in all N trials of every config: the per-trial divergence probability is then\n"
      << "#   below 1 - 0.05^(1/(N-1)) with 95% confidence (" << fmt("%.1f%%", 100 * (1 - std::pow(0.05, 1.0 / static_cast<double>(n_min - 1))))
      << " at N=" << n_min << ")\n";
  return o.str();
}

namespace {

struct AuditFacts {
  std::string store_sha256, wal_note;
  std::vector<std::string> anomalies;
};

AuditFacts audit_facts(const ReportData& data) {
  AuditFacts f;
  f.store_sha256 = sha256_file(data.store_path);
  const std::string wal = sha256_file(data.store_path + "-wal");
  std::FILE* w = std::fopen((data.store_path + "-wal").c_str(), "rb");
  if (w) {
    std::fseek(w, 0, SEEK_END);
    if (std::ftell(w) > 0) f.wal_note = "the store has a write-ahead log (" + data.store_path + "-wal, sha256 " + wal +
                                        "); `d9m merge -o FILE STORE` makes a single-file copy whose hash covers everything";
    std::fclose(w);
  }
  const Verdict v = verdict_of(data);
  for (const auto& b : v.broken) f.anomalies.push_back("claim broken: " + b);
  for (const auto& r : data.results) {
    const std::string where = r.op + "/" + r.config + "/" + r.variant + " on " + data.stack(r.stack).label;
    if (r.status == Status::error) f.anomalies.push_back("error: " + where + ": " + r.detail);
    if (r.status == Status::nondeterministic && !r.claim_broken()) {
      std::string diff;
      if (r.worst_diff)
        diff = "; worst trial: " + std::to_string(r.worst_diff->count) + " elements differ, up to " + std::to_string(r.worst_diff->max_ulp) +
               " ULP, first at " + std::to_string(r.worst_diff->first_index);
      f.anomalies.push_back("nondeterministic as claimed: " + where + ": " + std::to_string(r.distinct) + " digests in " +
                            std::to_string(r.trials) + " trials" + diff);
    }
  }
  for (const auto& d : stack_differences(data))
    f.anomalies.push_back("stack-to-stack difference: " + d.op + "/" + d.config + "/" + d.variant + ": " + data.stack(d.stack_a).label +
                          " " + d.digest_a + " vs " + data.stack(d.stack_b).label + " " + d.digest_b);
  for (const auto& r : data.run_rows)
    if (r.state != "complete") f.anomalies.push_back("run " + r.id + " on " + r.host + " is " + r.state);
  return f;
}

const char* kProcedure =
    "Each case (op, variant, config, input seed) was executed N times in one process per run, on the stack identified by its "
    "fingerprint. Inputs were generated on the host from the case seed with a counter-based generator whose bits are fully "
    "specified (SplitMix64), and their digest is recorded with the case: stacks are compared only on equal inputs. Every output "
    "of every trial was digested bit for bit with d9m-digest-v1 (XXH3-64 over 4096-byte leaves, XXH3-128 over the leaves). "
    "When a trial's digest differed from the run's first trial, the number of differing elements, the largest absolute and ULP "
    "differences and the first differing index were recorded. Trials were timed around the op alone (steady clock on the CPU, "
    "CUDA events on the GPU); zeroing an accumulated output is part of the op.";

const char* kCriteria =
    "A variant claimed deterministic passes on a stack when every trial of every run on that stack gave one digest; with N "
    "trials this bounds the per-trial divergence probability below 1 - 0.05^(1/(N-1)) at 95% confidence (the first trial is "
    "the reference, so N trials give N-1 chances to diverge). A variant claiming the bits of another implementation passes when "
    "both were deterministic and their digests are equal on the same inputs and stack. Claims of nondeterminism are "
    "informational: a nondeterministic variant that never diverged is reported, not failed. The audit passes when no claim "
    "broke.";

}  // namespace

std::string audit_sections_md(const ReportData& data) {
  const AuditFacts f = audit_facts(data);
  std::ostringstream o;
  o << "## Identification\n\n- tool: d9m " << d9m_version() << ", commit " << d9m_commit() << "\n- date: " << data.generated_at
    << "\n- store: `" << data.store_path << "`, SHA-256 `" << (f.store_sha256.empty() ? "unreadable" : f.store_sha256) << "`\n";
  if (!f.wal_note.empty()) o << "- note: " << f.wal_note << "\n";
  o << "- catalogue SHA-256: " << join(data.catalog_digests, ", ") << "\n\n## Procedure\n\n" << kProcedure
    << "\n\n## Acceptance criteria\n\n" << kCriteria << "\n\n## Runs\n\nThe chain root of a run is the last link of the SHA-256 "
       "chain over its rows (`d9m verify` recomputes it); quoting it here anchors the evidence outside the store.\n\n"
       "| run | stack | host | state | started | finished | N | threads | chain root | arguments |\n"
    << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.run_rows)
    o << "| `" << r.id << "` | " << data.stack(r.stack).label << " | " << cell(r.host) << " | " << r.state_text() << " | "
      << r.started_at << " | " << r.finished_at << " | " << r.trials_per_case << " | " << r.threads << " | `" << r.chain_root << "` | `"
      << cell(r.arguments) << "` |\n";
  o << "\n## Fingerprints\n\n";
  for (const auto& s : data.stacks) o << "### " << s.label << " `" << s.id << "`\n\n```json\n" << json_text(s.fingerprint, 2) << "\n```\n\n";
  o << "## Anomalies\n\n";
  if (f.anomalies.empty()) o << "None.\n";
  for (const auto& a : f.anomalies) o << "- " << cell(a) << "\n";
  o << "\n";
  return o.str();
}

std::string audit_sections_html(const ReportData& data) {
  const AuditFacts f = audit_facts(data);
  std::ostringstream o;
  o << "<h2>Identification</h2>\n<table><tbody><tr><th>tool</th><td>d9m " << xml_escape(d9m_version() + ", commit " + d9m_commit())
    << "</td></tr><tr><th>date</th><td>" << xml_escape(data.generated_at) << "</td></tr><tr><th>store</th><td><code>"
    << xml_escape(data.store_path) << "</code><br>SHA-256 <code>" << xml_escape(f.store_sha256.empty() ? "unreadable" : f.store_sha256)
    << "</code>" << (f.wal_note.empty() ? "" : "<br>" + xml_escape(f.wal_note)) << "</td></tr><tr><th>catalogue SHA-256</th><td><code>"
    << xml_escape(join(data.catalog_digests, ", ")) << "</code></td></tr></tbody></table>\n";
  o << "<h2>Procedure</h2>\n<p>" << xml_escape(kProcedure) << "</p>\n<h2>Acceptance criteria</h2>\n<p>" << xml_escape(kCriteria) << "</p>\n";
  o << "<h2>Runs</h2>\n<p>The chain root of a run is the last link of the SHA-256 chain over its rows (<code>d9m verify</code> "
       "recomputes it); quoting it here anchors the evidence outside the store.</p>\n<table><thead><tr><th>run</th><th>stack</th>"
       "<th>host</th><th>state</th><th>started</th><th>finished</th><th>N</th><th>threads</th><th>chain root</th><th>arguments</th>"
       "</tr></thead><tbody>\n";
  for (const auto& r : data.run_rows)
    o << "<tr><td><code>" << xml_escape(r.id) << "</code></td><td>" << xml_escape(data.stack(r.stack).label) << "</td><td>" << xml_escape(r.host)
      << "</td><td>" << xml_escape(r.state_text()) << "</td><td>" << xml_escape(r.started_at) << "</td><td>" << xml_escape(r.finished_at)
      << "</td><td>" << r.trials_per_case << "</td><td>" << r.threads << "</td><td><code>" << xml_escape(r.chain_root)
      << "</code></td><td><code>" << xml_escape(r.arguments) << "</code></td></tr>\n";
  o << "</tbody></table>\n<h2>Fingerprints</h2>\n";
  for (const auto& s : data.stacks)
    o << "<h3>" << xml_escape(s.label) << " <code>" << xml_escape(s.id) << "</code></h3>\n<pre class=\"meta\">" << xml_escape(json_text(s.fingerprint, 2))
      << "</pre>\n";
  o << "<h2>Anomalies</h2>\n<ul>";
  if (f.anomalies.empty()) o << "<li>None.</li>";
  for (const auto& a : f.anomalies) o << "<li>" << xml_escape(a) << "</li>";
  o << "</ul>\n";
  return o.str();
}

std::string render_markdown(const ReportData& data, bool audit) {
  std::ostringstream o;
  const Verdict verdict = verdict_of(data);

  o << "# d9m determinism " << (audit ? "audit report" : "status") << "\n\n```\n" << report_header(data) << "```\n\n";
  if (audit) o << audit_sections_md(data);
  o << "## Stacks\n\n| stack | fingerprint | runs | hosts | stack contents |\n|---|---|---|---|---|\n";
  for (const auto& s : data.stacks)
    o << "| " << s.label << " | `" << s.id.substr(0, 12) << "` | " << s.runs << " | " << cell(join(s.hosts, ", ")) << " | "
      << cell(s.summary()) << " |\n";

  // Rows: op and variant; columns: stacks.
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::vector<const CaseResult*>>> table;
  std::map<std::pair<std::string, std::string>, const CaseResult*> any_of;
  for (const auto& r : data.results) {
    table[{r.op, r.variant}][r.stack].push_back(&r);
    any_of[{r.op, r.variant}] = &r;
  }
  // Solutions per op and backend: the deterministic variant most often fastest, with its cost.
  using OpBackend = std::pair<std::string, std::string>;
  std::map<OpBackend, Solution> solutions;
  {
    std::map<OpBackend, std::map<std::string, int>> votes;
    const auto costs = determinism_costs(data);
    for (const auto& c : costs) ++votes[{c.op, c.backend}][c.solution];
    for (const auto& [key, vs] : votes) {
      const auto best = std::max_element(vs.begin(), vs.end(), [](auto& a, auto& b) { return a.second < b.second; });
      Solution s;
      s.variant = best->first;
      for (const auto& c : costs)
        if (c.op == key.first && c.backend == key.second && c.solution == s.variant) {
          s.ratios.push_back(c.ratio);
          s.against = c.against;
        }
      for (const auto& r : data.results)
        if (r.op == key.first && r.variant == s.variant) s.reason = r.claim_reason;
      solutions[key] = s;
    }
  }
  std::map<OpBackend, std::string> keys;
  for (const auto& [key, s] : solutions) keys[key] = std::string(1, static_cast<char>('a' + keys.size() % 26));

  o << "\n## Status by source\n\n| source | variant | claim |";
  for (const auto& s : data.stacks) o << " " << s.label << " |";
  o << " solution |\n|---|---|---|";
  for (std::size_t i = 0; i < data.stacks.size(); ++i) o << "---|";
  o << "---|\n";
  for (const auto& [key, per_stack] : table) {
    const CaseResult* r = any_of[key];
    o << "| " << key.first << " | " << key.second << " | " << short_claim(r->claim_determinism, r->claim_source) << " |";
    for (const auto& s : data.stacks) {
      auto it = per_stack.find(s.id);
      o << " " << status_cell(it == per_stack.end() ? std::vector<const CaseResult*>{} : it->second) << " |";
    }
    std::string sol;
    if (r->claim_determinism == "nondeterministic") {
      const OpBackend ob{key.first, r->backend};
      auto it = solutions.find(ob);
      sol = it == solutions.end() ? "none measured"
                                  : "use " + it->second.variant + ", " + fmt("%.2fx", it->second.geomean()) + " [" + keys[ob] + "]";
    }
    o << " " << sol << " |\n";
  }

  o << "\nKey: `D` one output digest in every trial of every config; `ND k/N` k distinct digests in N trials "
       "(worst config; \"m of n configs\" when not every config diverged); `E` error; `U` the variant does not support the config; `-` not run (or skipped) on that "
       "stack. Claim: what the variant is expected to be and who says so (design, vendor-doc, vendor-api).\n\n";
  for (const auto& [ob, s] : solutions) {
    const auto [lo, hi] = std::minmax_element(s.ratios.begin(), s.ratios.end());
    o << "- [" << keys[ob] << "] **" << ob.first << "** (" << ob.second << "): " << s.variant << " (" << s.reason << "). Cost: median time of "
      << s.variant << " over the median of the fastest nondeterministic variant (" << s.against << "), geometric mean "
      << fmt("%.2fx", s.geomean()) << " over " << s.ratios.size() << " config-stack pairs, range "
      << fmt("%.2fx", *lo) << "-" << fmt("%.2fx", *hi) << ".\n";
  }

  const auto cross = cross_checks(data);
  if (!cross.empty()) {
    std::map<std::tuple<std::string, std::string, std::string, std::string>, std::pair<int, int>> agg;  // equal / checked
    for (const auto& c : cross) {
      auto& [eq, n] = agg[{c.op, c.variant, c.partner, c.stack}];
      eq += c.equal();
      ++n;
    }
    o << "\n## Cross-implementation\n\nVariants that claim the bits of another implementation, checked on the same "
         "config, inputs and stack wherever both were deterministic.\n\n| op | variant | claims the bits of | stack | "
         "configs equal |\n|---|---|---|---|---|\n";
    for (const auto& [k, v] : agg)
      o << "| " << std::get<0>(k) << " | " << std::get<1>(k) << " | " << std::get<2>(k) << " | " << data.stack(std::get<3>(k)).label
        << " | " << (v.first == v.second ? "" : "**") << v.first << " of " << v.second << (v.first == v.second ? "" : "** (claim broken)")
        << " |\n";
  }

  const auto diffs = stack_differences(data);
  if (!diffs.empty()) {
    o << "\n## Stack-to-stack differences\n\nDeterministic on each stack, but a different output on the same inputs: "
         "reproducible run to run, not stack to stack.\n\n| op | config | variant | stacks | digests |\n|---|---|---|---|---|\n";
    for (const auto& d : diffs)
      o << "| " << d.op << " | " << cell(d.config) << " | " << d.variant << " | " << data.stack(d.stack_a).label << " vs "
        << data.stack(d.stack_b).label << " | `" << d.digest_a.substr(0, 12) << "` vs `" << d.digest_b.substr(0, 12) << "` |\n";
  }

  o << "\n## Cases\n\n| op | config | variant | stack | status | trials | distinct | 95% bound | median | min | worst diff |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.results) {
    std::string diff = "-";
    if (r.worst_diff)
      diff = std::to_string(r.worst_diff->count) + " elems, " + std::to_string(r.worst_diff->max_ulp) + " ULP, " +
             fmt("%.3g", r.worst_diff->max_abs) + " abs";
    const std::string st = to_string(r.status) + (r.detail.empty() ? "" : " (" + r.detail + ")");
    o << "| " << r.op << " | " << cell(r.config) << " | " << r.variant << " | " << data.stack(r.stack).label << " | "
      << cell(st) << " | " << r.trials << " | " << r.distinct << " | "
      << (r.status == Status::deterministic ? fmt("< %.3g", r.bound95()) : "-") << " | " << duration(r.median_ns)
      << " | " << duration(r.min_ns) << " | " << diff << " |\n";
  }

  o << "\n## Verdict\n\n```\n";
  o << "# cases: " << verdict.cases << "   DETERMINISTIC " << verdict.by_status[0] << "   NONDETERMINISTIC "
    << verdict.by_status[1] << "   ERROR " << verdict.by_status[2] << "   UNSUPPORTED " << verdict.by_status[3]
    << "   SKIPPED " << verdict.by_status[4] << "\n";
  std::map<std::string, std::pair<int, int>> by_variant;  // nondeterministic-claimed: ND seen / run
  for (const auto& r : data.results)
    if (r.claim_determinism == "nondeterministic" && (r.status == Status::deterministic || r.status == Status::nondeterministic)) {
      auto& [nd, total] = by_variant[r.variant];
      nd += r.status == Status::nondeterministic;
      ++total;
    }
  for (const auto& [v, c] : by_variant)
    o << "# " << v << " (claimed nondeterministic) diverged in " << c.first << " of " << c.second << " cases\n";
  if (verdict.held()) {
    o << "# Claims held: every variant claimed deterministic gave one digest in all its trials.\n";
  } else {
    o << "# CLAIMS BROKEN: " << verdict.broken.size() << " case(s) claimed deterministic diverged:\n";
    for (const auto& b : verdict.broken) o << "#   " << b << "\n";
  }
  if (verdict.by_status[2]) o << "# " << verdict.by_status[2] << " case(s) ended in ERROR: see the Cases table.\n";
  for (const auto& w : verdict.warnings) o << "# WARNING: " << w << "\n";
  o << "```\n";
  return o.str();
}

std::string render_json(const ReportData& data) {
  const Verdict verdict = verdict_of(data);
  json stacks = json::array();
  for (const auto& s : data.stacks)
    stacks.push_back({{"id", s.id}, {"label", s.label}, {"runs", s.runs}, {"hosts", s.hosts}, {"fingerprint", s.fingerprint}});
  json results = json::array();
  for (const auto& r : data.results) {
    json j = {{"op", r.op},
              {"variant", r.variant},
              {"backend", r.backend},
              {"config", r.config},
              {"config_id", r.config_id},
              {"params", json::parse(r.params, nullptr, false)},
              {"stack", r.stack},
              {"case_id", r.case_id},
              {"input_digest", r.input_digest},
              {"output", {{"dtype", r.output_dtype}, {"shape", r.output_shape}}},
              {"status", to_string(r.status)},
              {"detail", r.detail},
              {"runs", r.runs},
              {"trials", r.trials},
              {"distinct", r.distinct},
              {"digest", r.digest},
              {"claim", {{"determinism", r.claim_determinism}, {"source", r.claim_source}, {"reason", r.claim_reason}}},
              {"claim_broken", r.claim_broken()},
              {"bit_equal_to", r.bit_equal_to.empty() ? json(nullptr) : json(r.bit_equal_to)},
              {"bound95", r.status == Status::deterministic ? json(r.bound95()) : json(nullptr)},
              {"median_ns", r.median_ns ? json(*r.median_ns) : json(nullptr)},
              {"min_ns", r.min_ns ? json(*r.min_ns) : json(nullptr)}};
    if (r.worst_diff)
      j["worst_diff"] = {{"count", r.worst_diff->count}, {"max_abs", r.worst_diff->max_abs},
                         {"max_ulp", r.worst_diff->max_ulp}, {"first_index", r.worst_diff->first_index}};
    results.push_back(std::move(j));
  }
  json costs = json::array();
  for (const auto& c : determinism_costs(data))
    costs.push_back({{"op", c.op}, {"config", c.config}, {"stack", c.stack}, {"solution", c.solution},
                     {"against", c.against}, {"ratio", c.ratio}});
  json cross = json::array();
  for (const auto& c : cross_checks(data))
    cross.push_back({{"op", c.op}, {"config", c.config}, {"stack", c.stack}, {"variant", c.variant}, {"partner", c.partner},
                     {"digest", c.digest}, {"partner_digest", c.partner_digest}, {"equal", c.equal()}});
  json diffs = json::array();
  for (const auto& d : stack_differences(data))
    diffs.push_back({{"op", d.op}, {"config", d.config}, {"variant", d.variant}, {"stack_a", d.stack_a}, {"stack_b", d.stack_b},
                     {"digest_a", d.digest_a}, {"digest_b", d.digest_b}});
  json counts = json::object();
  for (int i = 0; i < 5; ++i) counts[to_string(static_cast<Status>(i))] = verdict.by_status[i];
  const json report = {{"schema", "d9m.report/1"},
                       {"generator", {{"name", "d9m"}, {"version", d9m_version()}, {"commit", d9m_commit()}}},
                       {"generated_at", data.generated_at},
                       {"store", data.store_path},
                       {"evidence", {{"sha256", data.evidence.digest}, {"manifest_heads", data.evidence.manifest_heads}}},
                       {"runs", data.runs},
                       {"interrupted_runs", data.interrupted_runs},
                       {"trials_per_case", data.trials_per_case},
                       {"catalog_digests", data.catalog_digests},
                       {"stacks", stacks},
                       {"results", results},
                       {"costs", costs},
                       {"cross_implementation", cross},
                       {"stack_differences", diffs},
                       {"verdict", {{"claims_held", verdict.held()}, {"broken", verdict.broken}, {"warnings", verdict.warnings}, {"counts", counts}}}};
  return json_text(report, 2) + "\n";
}

}  // namespace d9m
