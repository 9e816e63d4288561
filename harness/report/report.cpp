// What every text report shares: the header naming every run parameter, and the audit sections
// (identification, procedure, acceptance criteria, runs, fingerprints, anomalies) of `--audit`.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/core/digest.h"
#include "harness/core/escape.h"
#include "harness/core/fingerprint.h"
#include "harness/core/json_text.h"
#include "harness/report/format.h"
#include "harness/report/report.h"

namespace d9m {

std::string report_header(const ReportData& data) {
  std::ostringstream o;
  const std::int64_t n_min = data.trials_per_case.empty() ? 0 : data.trials_per_case.front();
  o << "# d9m " << d9m_version() << " (" << d9m_commit() << "), report generated " << data.generated_at << "\n";
  o << "# store: " << data.store_path << "   runs: " << data.runs << " (" << data.interrupted_runs << " interrupted)   stacks: "
    << data.stacks.size() << "\n";
  o << "# trials per case: " << format::join_numbers(data.trials_per_case) << "   threads: " << format::join_numbers(data.threads)
    << "   d9m versions: " << format::join(data.d9m_versions, ", ") << "\n";
  o << "# catalogue sha256: " << format::join(data.catalog_digests, ", ") << "\n";
  o << "# evidence sha256: " << data.evidence.digest << "   manifest heads: "
    << (data.evidence.manifest_heads.empty() ? "none (no manifest: a store older than schema 3, or one whose manifest was dropped; `d9m verify` tells which)" : format::join(data.evidence.manifest_heads, ", "))
    << "\n";
  if (!data.selection.empty())
    o << "# selection: " << data.selection << " (the table and verdict cover only this part of the store; the evidence sha256 is "
      << "the whole store's)\n";
  if (n_min >= 2)
    o << "# D means one digest in all N trials of every config: the per-trial divergence probability is then\n"
      << "#   below 1 - 0.05^(1/(N-1)) with 95% confidence (" << format::num("%.1f%%", 100 * (1 - std::pow(0.05, 1.0 / static_cast<double>(n_min - 1))))
      << " at N=" << n_min << ")\n";
  return o.str();
}

std::string pipeline_summary(const ReportData& data, const PipelineTrace& p) {
  std::string s = p.pipeline + " (setting " + p.setting + ", " + p.config + ", run " + p.run_id.substr(0, 12);
  for (const auto& r : data.run_rows)
    if (r.id == p.run_id) s += " on " + data.stack(r.stack).label;
  s += "): ";
  if (p.trials == 0) return s + "no trials recorded";
  if (p.distinct <= 1) return s + "one trajectory in " + std::to_string(p.trials) + " trials, no divergence";
  return s + std::to_string(p.distinct) + " trajectories in " + std::to_string(p.trials) + " trials";
}

namespace {

struct AuditFacts {
  std::string store_sha256;
  std::vector<std::string> anomalies;
};

AuditFacts audit_facts(const ReportData& data, const StatusModel& model) {
  AuditFacts f;
  f.store_sha256 = data.store_sha256.empty() ? "not taken" : data.store_sha256;
  for (const auto& failure : model.verdict.failures) f.anomalies.push_back(to_string(failure.kind) + ": " + failure.text);
  for (const auto& warning : model.verdict.warnings) f.anomalies.push_back("warning: " + warning);
  for (const auto& r : data.results) {
    const std::string where = r.label() + " on " + data.stack(r.stack).label;
    if (r.status == Status::nondeterministic && !r.claim_broken()) {
      std::string diff;
      if (r.worst_diff)
        diff = "; worst over the trials: " + std::to_string(r.worst_diff->count) + " elements differ, up to " + std::to_string(r.worst_diff->max_ulp) +
               " ULP, first at " + std::to_string(r.worst_diff->first_index);
      f.anomalies.push_back("nondeterministic as claimed: " + where + ": " + std::to_string(r.distinct) + " digests in " +
                            std::to_string(r.trials) + " trials" + diff);
    }
  }
  for (const auto& d : model.stack_differences)
    f.anomalies.push_back("stack-to-stack difference: " + d.label + ": " + data.stack(d.stack_a).label +
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
    "both were deterministic and their digests are equal on the same inputs and stack, or on a stack that differs from it only "
    "in the frameworks a run drove (PyTorch's version), which d9m's own variants do not depend on. Claims of nondeterminism are "
    "informational: a nondeterministic variant that never diverged is reported, not failed. A case that ended in ERROR in "
    "every run that recorded it has no evidence and fails the audit: nothing was certified. The audit passes when no claim "
    "broke and every case that ran has evidence; SKIPPED and UNSUPPORTED cases (no device, a config the variant does not "
    "support) were not run and certify nothing; where no case but d9m's controls ran, the verdict is NO EVIDENCE, not a pass, and "
    "d9m attest does not sign it.";

}  // namespace

std::string audit_sections_md(const ReportData& data, const StatusModel& model) {
  const AuditFacts f = audit_facts(data, model);
  std::ostringstream o;
  o << "## Identification\n\n- tool: d9m " << d9m_version() << ", commit " << d9m_commit() << "\n- date: " << data.generated_at
    << "\n- store: `" << data.store_path << "`, SHA-256 `" << f.store_sha256 << "`\n";
  o << "- catalogue SHA-256: " << format::join(data.catalog_digests, ", ") << "\n\n## Procedure\n\n" << kProcedure
    << "\n\n## Acceptance criteria\n\n" << kCriteria << "\n\n## Runs\n\nThe chain root of a run is the last link of the SHA-256 "
       "chain over its rows (`d9m verify` recomputes it); quoting it here anchors the evidence outside the store.\n\n"
       "| run | stack | host | state | started | finished | N | threads | chain root | arguments |\n"
    << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.run_rows)
    o << "| `" << r.id << "` | " << data.stack(r.stack).label << " | " << format::md_cell(r.host) << " | " << r.state_text() << " | "
      << r.started_at << " | " << r.finished_at << " | " << r.trials_per_case << " | " << r.threads << " | `" << r.chain_root << "` | `"
      << format::md_cell(r.arguments) << "` |\n";
  o << "\n## Fingerprints\n\n";
  for (const auto& s : data.stacks) o << "### " << s.label << " `" << s.id << "`\n\n```json\n" << json_text(s.fingerprint, 2) << "\n```\n\n";
  o << "## Anomalies\n\n";
  if (f.anomalies.empty()) o << "None.\n";
  for (const auto& a : f.anomalies) o << "- " << format::md_cell(a) << "\n";
  o << "\n";
  return o.str();
}

std::string audit_sections_html(const ReportData& data, const StatusModel& model) {
  const AuditFacts f = audit_facts(data, model);
  std::ostringstream o;
  o << "<h2>Identification</h2>\n<table><tbody><tr><th>tool</th><td>d9m " << xml_escape(d9m_version() + ", commit " + d9m_commit())
    << "</td></tr><tr><th>date</th><td>" << xml_escape(data.generated_at) << "</td></tr><tr><th>store</th><td><code>"
    << xml_escape(data.store_path) << "</code><br>SHA-256 <code>" << xml_escape(f.store_sha256)
    << "</code></td></tr><tr><th>catalogue SHA-256</th><td><code>"
    << xml_escape(format::join(data.catalog_digests, ", ")) << "</code></td></tr></tbody></table>\n";
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

}  // namespace d9m
