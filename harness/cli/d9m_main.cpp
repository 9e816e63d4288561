// The d9m command line (DESIGN.md "CLI"). Exit codes: 0 every claim held, 1 a claim was broken
// (or verify found a fault), 2 bad usage or bad input, 3 environment problem.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "harness/attest/attest.h"
#include "harness/core/json_text.h"
#include "harness/core/catalog.h"
#include "harness/report/compare.h"
#include "harness/core/error.h"
#include "harness/core/fingerprint.h"
#include "harness/store/merge.h"
#include "harness/core/npy.h"
#include "harness/report/report.h"
#include "harness/exec/runner.h"
#include "harness/exec/worker.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m {
namespace {

using nlohmann::json;

Catalog load_catalog(const std::string& path) {
  return path.empty() ? default_catalog(Registry::global()) : load_catalog_file(path, Registry::global());
}

std::string claim_text(const Claim& c) {
  return to_string(c.determinism) + " (" + to_string(c.source) + "): " + c.reason;
}

int cmd_list(const std::string& catalog_path, const std::string& backend, const std::vector<std::string>& ops,
             bool as_json, bool cases_only) {
  const Catalog cat = load_catalog(catalog_path);
  Selection sel;
  sel.backend = backend;
  sel.op_globs = ops;
  const auto cases = plan_cases(cat, Registry::global(), sel);
  if (cases_only) {  // one case per line, for CTest registration
    for (const auto& c : cases)
      std::cout << c.config->op->name << "/" << c.config->name << "/" << c.variant->name << " "
                << to_string(c.variant->backend) << "\n";
    return 0;
  }
  if (as_json) {
    json out = {{"schema", "d9m.list/1"}, {"catalog", cat.source}, {"catalog_digest", cat.digest}, {"ops", json::array()}};
    for (const auto& op : Registry::global().ops()) {
      bool selected = false;
      for (const auto& c : cases) selected |= c.config->op == &op;
      if (!selected) continue;
      json params = json::array();
      for (const auto& p : op.params) params.push_back({{"name", p.name}, {"doc", p.doc}, {"required", !p.default_value}});
      json variants = json::array();
      for (const auto* v : Registry::global().variants_of(op.name))
        variants.push_back({{"name", v->name}, {"backend", to_string(v->backend)},
                            {"claim", {{"determinism", to_string(v->claim.determinism)}, {"source", to_string(v->claim.source)}, {"reason", v->claim.reason}}}});
      json configs = json::array();
      for (const auto& cc : cat.configs)
        if (cc.op == &op) configs.push_back({{"name", cc.name}, {"config_id", cc.config_id}, {"params", cc.params_json}, {"seed", cc.seed}});
      out["ops"].push_back({{"name", op.name}, {"family", op.family}, {"summary", op.summary}, {"params", params},
                            {"variants", variants}, {"configs", configs}});
    }
    std::cout << json_text(out, 2) << "\n";
    return 0;
  }
  std::printf("# catalogue %s (sha256 %.12s), %zu cases\n", cat.source.c_str(), cat.digest.c_str(), cases.size());
  std::string last_op;
  for (const auto& op : Registry::global().ops()) {
    std::vector<std::string> configs;
    for (const auto& cc : cat.configs)
      if (cc.op == &op) configs.push_back(cc.name);
    bool selected = false;
    for (const auto& c : cases) selected |= c.config->op == &op;
    if (!selected) continue;
    std::printf("\n%s  [%s]  %s\n  configs:", op.name.c_str(), op.family.c_str(), op.summary.c_str());
    for (const auto& c : configs) std::printf(" %s", c.c_str());
    std::printf("\n");
    for (const auto* v : Registry::global().variants_of(op.name))
      std::printf("  %-22s %-5s %s\n", v->name.c_str(), to_string(v->backend).c_str(), claim_text(v->claim).c_str());
  }
  return 0;
}

int cmd_fingerprint(bool as_json) {
  const GpuProbe gpus = probe_gpus();
  const Fingerprint fp = collect_fingerprint(gpus);
  if (as_json) {
    std::cout << json_text(json({{"id", fp.id}, {"fingerprint", fp.json}, {"gpu_status", gpus.status}, {"host", host_name()},
                                 {"gpu_uuids", gpus.uuids}}), 2)
              << "\n";
  } else {
    std::cout << "fingerprint " << fp.id << "\n" << json_text(fp.json, 2) << "\n";
    std::cout << "gpu: " << gpus.status << "\n";
  }
  return 0;
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  write_file_atomically(path, text);
}

std::string render(const ReportData& data, const std::string& format, bool audit) {
  if (audit && format != "md" && format != "html") fail_usage("--audit goes with --format md or html");
  if (format == "md") return render_markdown(data, audit);
  if (format == "html") return render_html(data, audit);
  if (format == "json") return render_json(data);
  if (format == "junit") return render_junit(data);
  if (format == "csv") return render_csv(data);
  fail_usage("--format must be md, html, json, junit or csv, got '" + format + "'");
}

extern "C" void on_signal(int) { request_stop(); }

// This binary, for starting worker processes of the same build: /proc/self/exe is the running
// image even if the file was replaced (rebuilt) or deleted since.
std::string self_executable() {
  if (::access("/proc/self/exe", X_OK) != 0)
    fail_environment("cannot find this executable (/proc/self/exe) to start worker processes; --no-isolation runs without");
  return "/proc/self/exe";
}

}  // namespace

int main_impl(int argc, char** argv) {
  CLI::App app{"d9m: audits and certifies the determinism of deep-learning ops"};
  app.require_subcommand(1);
  app.set_version_flag("--version", d9m_version() + " (" + d9m_commit() + ")");

  std::string catalog_path, backend = "all", db = "d9m.sqlite", format = "md", output, run_id, save_dir;
  std::vector<std::string> ops, variants, configs, stacks, merge_inputs;
  std::string diff_a, diff_b, baseline_file, report_file, key_file, attestation_file, pubkey_file;
  double timing_tolerance = 0.25;
  bool as_json = false, cases_only = false, quiet = false, ctest = false, audit = false, no_canaries = false,
       resume = false, no_isolation = false;
  double case_timeout = 300;
  std::string worker_digest;
  int worker_parent = 0;
  std::int64_t trials = 20;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());

  auto* list = app.add_subcommand("list", "the catalogue as built: ops, variants, claims, configs");
  list->add_option("--backend", backend, "cpu, cuda or all")->check(CLI::IsMember({"cpu", "cuda", "all"}));
  list->add_option("--op", ops, "only ops matching these globs");
  list->add_option("--catalog", catalog_path, "catalogue JSON replacing the built-in one");
  list->add_flag("--json", as_json, "machine-readable");
  list->add_flag("--cases", cases_only, "one case per line: op/config/variant backend");

  auto* fpc = app.add_subcommand("fingerprint", "the stack fingerprint of this machine");
  fpc->add_flag("--json", as_json, "machine-readable");

  auto* run = app.add_subcommand("run", "run the audit and store the evidence");
  run->add_option("-n,--trials", trials, "trials per case (at least 2)")->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 30));
  run->add_option("--backend", backend, "cpu, cuda or all")->check(CLI::IsMember({"cpu", "cuda", "all"}));
  run->add_option("--op", ops, "only ops matching these globs");
  run->add_option("--variant", variants, "only variants matching these globs");
  run->add_option("--config", configs, "only configs matching these globs");
  run->add_option("--threads", threads, "CPU worker threads")->check(CLI::Range(1u, 1024u));
  run->add_option("--db", db, "store file");
  run->add_option("--catalog", catalog_path, "catalogue JSON replacing the built-in one");
  run->add_option("--save-outputs", save_dir, "write inputs and first outputs as .npy under this folder");
  run->add_flag("-q,--quiet", quiet, "print no status table at the end");
  run->add_flag("--no-canaries", no_canaries, "leave out the deterministic and nondeterministic controls");
  run->add_flag("--ctest", ctest, "exit 77 (CTest's skip) when every selected case was SKIPPED");
  run->add_option("--timeout", case_timeout,
                  "watchdog: a case whose next trial takes longer than this many seconds is stopped and is an ERROR")
      ->check(CLI::Range(0.1, 1e7));
  run->add_flag("--no-isolation", no_isolation,
                "run cases in this process, not in a worker process (for debuggers; a crash then ends the run)");
  run->add_flag("--resume", resume,
                "continue the newest interrupted run of the same cases, N and threads (a new run if there is none)");

  // The worker process of `d9m run` (harness/exec/worker.h): not for people, hence hidden.
  auto* worker = app.add_subcommand("_worker", "")->group("");
  worker->add_option("--catalog", catalog_path);
  worker->add_option("--catalog-digest", worker_digest)->required();
  worker->add_option("--threads", threads);
  worker->add_option("--parent", worker_parent)->required();

  auto* report = app.add_subcommand("report", "render the evidence in a store");
  report->add_option("--db", db, "store file");
  report->add_option("--format", format, "md, html, json, junit or csv");
  report->add_option("-o,--output", output, "file to write (default: standard output)");
  report->add_option("--run", run_id, "only this run");
  report->add_flag("--audit", audit, "the audit report for regulated use (md, html)");
  report->add_option("--stacks", stacks, "only these stacks (label S1, fingerprint prefix or host)")->delimiter(',');

  auto* merge = app.add_subcommand("merge", "combine stores (idempotent, order-independent)");
  merge->add_option("-o,--output", output, "the merged store (created, or merged into)")->required();
  merge->add_option("inputs", merge_inputs, "stores to merge")->required();

  auto* diff = app.add_subcommand("diff", "what changed between two stores, runs or stacks");
  diff->add_option("a", diff_a, "STORE[@SELECTOR]: selector S1, a fingerprint prefix, a host or run:<id prefix>")->required();
  diff->add_option("b", diff_b, "STORE[@SELECTOR]")->required();
  diff->add_option("--timing-tolerance", timing_tolerance, "relative timing change that counts (default 0.25)");
  diff->add_option("-o,--output", output, "file to write (default: standard output)");

  auto* baseline = app.add_subcommand("baseline", "golden digests: pin them, check a store against them");
  baseline->require_subcommand(1);
  auto* pin = baseline->add_subcommand("pin", "write the deterministic digests of a store");
  pin->add_option("--db", db, "store file");
  pin->add_option("--stacks", stacks, "only these stacks")->delimiter(',');
  pin->add_option("-o,--output", output, "baseline file")->required();
  auto* check = baseline->add_subcommand("check", "exit 1 when a pinned case drifted");
  check->add_option("--db", db, "store file");
  check->add_option("baseline", baseline_file, "baseline file")->required();

  auto* attest = app.add_subcommand("attest", "in-toto attestation of a report and its store (DSSE, Ed25519)");
  attest->add_option("--db", db, "store file");
  attest->add_option("--report", report_file, "the report file the statement covers")->required();
  attest->add_option("--key", key_file, "Ed25519 private key (PEM) to sign with; unsigned without it");
  attest->add_option("-o,--output", output, "attestation file (default: standard output)");

  auto* verify = app.add_subcommand("verify", "integrity and consistency of a store, or an attestation");
  verify->add_option("--db", db, "store file");
  verify->add_option("--attestation", attestation_file, "check this attestation instead of a store");
  verify->add_option("--pubkey", pubkey_file, "Ed25519 public key (PEM) for --attestation");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }

  if (*list) return cmd_list(catalog_path, backend, ops, as_json, cases_only);
  if (*fpc) return cmd_fingerprint(as_json);
  if (*worker) return worker_main(load_catalog(catalog_path), threads, worker_digest, static_cast<pid_t>(worker_parent));
  if (*run) {
    const Catalog cat = load_catalog(catalog_path);
    const Selection sel{backend, ops, variants, configs};
    const auto cases = plan_cases(cat, Registry::global(), sel);
    Store store = Store::open(db, Store::Mode::read_write);
    if (!store.notice().empty()) std::fprintf(stderr, "d9m: %s\n", store.notice().c_str());
    RunOptions opt;
    opt.resume = resume;
    opt.catalog_path = catalog_path;
    opt.case_timeout_s = case_timeout;
    if (!no_isolation) opt.worker_executable = self_executable();
    opt.trials = trials;
    opt.threads = threads;
    opt.progress = isatty(STDERR_FILENO) != 0;
    opt.canaries = !no_canaries;
    if (!save_dir.empty()) opt.save_outputs = save_dir;
    opt.arguments_json = json_text(json(std::vector<std::string>(argv, argv + argc)));
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const RunSummary s = run_audit(cat, cases, store, opt);
    if (!quiet) std::cout << render_markdown(load_report_data(store, s.run_id));
    if (s.resumes > 0)
      std::fprintf(stderr, "d9m: resumed run %s (resumption %lld): %lld cases were stored before, kept as they are\n",
                   s.run_id.c_str(), static_cast<long long>(s.resumes), static_cast<long long>(s.resumed_cases));
    else if (resume && s.resume_busy > 0)
      std::fprintf(stderr, "d9m: --resume: %d matching run(s) are being run or resumed by another process; started a new run\n",
                   s.resume_busy);
    else if (resume)
      std::fprintf(stderr, "d9m: --resume: no interrupted run of these cases, N and threads; started a new run\n");
    std::fprintf(stderr, "d9m: run %s: %lld cases into %s\n", s.run_id.c_str(), static_cast<long long>(s.cases), db.c_str());
    if (s.interrupted) {
      std::fprintf(stderr, "d9m: interrupted; the run is marked interrupted in the store (`d9m run --resume` with the same arguments continues it)\n");
      return 130;
    }
    for (const auto& b : s.broken_claims) std::fprintf(stderr, "d9m: claim broken: %s\n", b.c_str());
    if (ctest && s.cases > 0 && s.by_status[static_cast<int>(Status::skipped)] == s.cases) return 77;
    return s.broken_claims.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
  }
  if (*report) {
    const Store store = Store::open(db, Store::Mode::read_only);
    ReportData data = load_report_data(store, run_id.empty() ? std::nullopt : std::optional(run_id));
    if (!run_id.empty() && data.runs == 0) fail_usage("--run " + run_id + ": no such run in " + db);
    select_stacks(data, stacks);
    write_output(output, render(data, format, audit));
    return verdict_of(data).held() ? 0 : static_cast<int>(ExitCode::claim_broken);
  }
  if (*merge) {
    const MergeSummary m = merge_stores(output, merge_inputs);
    std::printf("%s: %lld rows added, %lld already present\n", output.c_str(), static_cast<long long>(m.added),
                static_cast<long long>(m.present));
    return 0;
  }
  if (*diff) {
    const DiffReport d = diff_reports(load_operand(diff_a), load_operand(diff_b), timing_tolerance);
    write_output(output, render_diff(d, diff_a, diff_b));
    return d.regressions.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
  }
  if (*pin) {
    const Store store = Store::open(db, Store::Mode::read_only);
    ReportData data = load_report_data(store);
    select_stacks(data, stacks);
    write_output(output, json_text(pin_baseline(data), 1) + "\n");
    return 0;
  }
  if (*check) {
    std::ifstream in(baseline_file);
    if (!in) fail_usage(baseline_file + ": cannot read the baseline");
    nlohmann::json b;
    try {
      b = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      fail_usage(baseline_file + ": " + e.what());
    }
    const Store store = Store::open(db, Store::Mode::read_only);
    const BaselineCheck c = check_baseline(load_report_data(store), b, baseline_file);
    for (const auto& n : c.notes) std::printf("note: %s\n", n.c_str());
    for (const auto& m : c.missing) std::printf("missing: %s\n", m.c_str());
    for (const auto& d : c.drifted) std::printf("DRIFT: %s\n", d.c_str());
    std::printf("%s against %s: %lld cases checked, %zu drifted, %zu missing\n", db.c_str(), baseline_file.c_str(),
                static_cast<long long>(c.checked), c.drifted.size(), c.missing.size());
    return c.drifted.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
  }
  if (*attest) {
    const Store store = Store::open(db, Store::Mode::read_only);
    const nlohmann::json statement = make_statement(load_report_data(store), report_file, db);
    write_output(output, json_text(make_envelope(statement, key_file.empty() ? std::nullopt : std::optional(key_file)), 2) + "\n");
    return 0;
  }
  if (*verify && !attestation_file.empty()) {
    if (pubkey_file.empty()) fail_usage("--attestation needs --pubkey");
    const AttestationCheck c = verify_attestation(attestation_file, pubkey_file, "");
    for (const auto& p : c.problems) std::printf("FAULT: %s\n", p.c_str());
    std::printf("%s: %s (result %s)\n", attestation_file.c_str(), c.problems.empty() ? "OK, signature and subjects verify" : "INVALID",
                c.statement.contains("predicate") ? c.statement["predicate"].value("result", "?").c_str() : "?");
    return c.problems.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
  }
  if (*verify) {
    const Store store = Store::open(db, Store::Mode::read_only);
    const VerifyReport v = verify_store(store);
    for (const auto& n : v.notes) std::printf("note: %s\n", n.c_str());
    for (const auto& r : v.chain_roots) std::printf("chain root: %s\n", r.c_str());
    for (const auto& p : v.problems) std::printf("FAULT: %s\n", p.c_str());
    std::printf("%s: %s (%lld runs, %lld cases, %lld trials checked)\n", db.c_str(),
                v.problems.empty() ? "OK" : "FAULTS FOUND", static_cast<long long>(v.runs),
                static_cast<long long>(v.cases), static_cast<long long>(v.trials));
    return v.problems.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
  }
  return static_cast<int>(ExitCode::usage);
}

}  // namespace d9m

int main(int argc, char** argv) {
  // Past a file size limit (ulimit -f) a write must fail with EFBIG, which the store reports and
  // survives, instead of SIGXFSZ killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return d9m::main_impl(argc, argv);
  } catch (const d9m::Error& e) {
    std::fprintf(stderr, "d9m: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "d9m: internal error: %s\n", e.what());
    return static_cast<int>(d9m::ExitCode::environment);
  }
}
