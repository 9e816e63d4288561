// d9m report: the evidence in a store, rendered in one of the report formats.
#include <cstdio>
#include <memory>
#include <optional>

#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/report/report.h"
#include "harness/store/snapshot.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m::cli {
namespace {

struct ReportArgs {
  std::string db = "d9m.sqlite", format = "md", output, run_id;
  std::vector<std::string> stacks;
  bool audit = false, no_verify = false;
};

int report(const ReportArgs& a) {
  check_output(a.output, {a.db});
  const Store store = Store::open(a.db, Store::Mode::read_only);
  // The audit report quotes the store file's SHA-256: only of a file that holds everything, and
  // only of a store that verifies (a filing must not present edited evidence as clean).
  std::optional<SingleFileSnapshot> snapshot;
  if (a.audit) {
    snapshot.emplace(store, "audited");
    require_sound(store, "rendered as an audit report");
  } else if (!a.no_verify) {
    // Every report names the store's evidence digest, which is taken over the stored links: of an
    // edited store it is the digest of the store before the edit, beside cells that changed (found
    // by audit). So a report is of a store that verifies, unless asked otherwise.
    require_sound(store, "rendered",
                  "; `d9m report --no-verify` renders it as it is now, edited rows and all, under the digest it had "
                  "before");
  }
  // Every read on the same connection: inside the audit's snapshot.
  std::optional<std::string> run;  // a whole id, or its start as the reports print it (12 characters)
  if (!a.run_id.empty()) run = store.run_id_with_prefix(a.run_id, "--run " + a.run_id);
  StoreReport report(store, run, a.stacks);
  if (a.audit) report.data().store_sha256 = sha256_file(store.path());
  write_output(a.output, report.render(a.format, a.audit));
  const Verdict& verdict = report.model().verdict;
  if (verdict.certifies_nothing()) std::fprintf(stderr, "d9m: NO EVIDENCE: %s\n", verdict.no_evidence().c_str());
  return verdict.held() ? 0 : static_cast<int>(ExitCode::claim_broken);
}

}  // namespace

void add_report(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<ReportArgs>();
  auto* c = app.add_subcommand("report", "render the evidence in a store");
  c->add_option("--db", o->db, "store file");
  c->add_option("--format", o->format, "md, html, json, junit or csv");
  c->add_option("-o,--output", o->output, "file to write (default: standard output)");
  c->add_option("--run", o->run_id, "only this run (its id, or enough of its start to name one run)");
  c->add_flag("--audit", o->audit, "the audit report for regulated use (md, html)");
  c->add_flag("--no-verify", o->no_verify, "render without verifying the store first (faster; an edited store renders as edited)")
      ->excludes("--audit");
  c->add_option("--stacks", o->stacks, "only these stacks (label S1, fingerprint prefix or host)")->delimiter(',');
  verbs.push_back({c, [o] { return report(*o); }});
}

}  // namespace d9m::cli
