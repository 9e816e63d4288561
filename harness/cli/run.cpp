// d9m run: the audit. Every selected case N times, into the store, then the status table.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/error.h"
#include "harness/core/json_text.h"
#include "harness/exec/runner.h"
#include "harness/exec/saved_outputs.h"
#include "harness/exec/worker.h"
#include "harness/report/report.h"
#include "harness/store/store.h"

namespace d9m::cli {
namespace {

struct RunArgs {
  std::string catalog, profile = "default", backend = "all", db = "d9m.sqlite", save_outputs;
  std::vector<std::string> ops, variants, configs, pipelines;
  std::int64_t trials = 20;
  std::int64_t steps = 0;  // --steps: every pipeline's step count (0: the catalogue's)
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  bool quiet = false, ctest = false, no_canaries = false, resume = false, no_isolation = false;
  double timeout = 300;
  std::vector<std::string> argv;  // the whole command line, recorded with the run
};

extern "C" void on_signal(int) { request_stop(); }

// This binary, for starting worker processes of the same build: /proc/self/exe is the running
// image even if the file was replaced (rebuilt) or deleted since. Nullopt where /proc is missing.
std::optional<std::string> self_executable() {
  if (::access("/proc/self/exe", X_OK) != 0) return std::nullopt;
  return "/proc/self/exe";
}

int run(const RunArgs& a) {
  // The first worker starts now, so that its start overlaps this process's catalogue, store and
  // fingerprint (exec/worker.h). A built-in profile it parses itself; a catalogue file is sent.
  // A failure to start it is not reported here, so that it cannot hide a usage error: the first
  // case tries again, and fails the run as before.
  std::shared_ptr<Worker> worker;
  const std::optional<std::string> executable = a.no_isolation ? std::nullopt : self_executable();
  if (executable) {
    worker = std::make_shared<Worker>(WorkerOptions{*executable, nullptr, a.threads, a.timeout, a.catalog.empty() ? a.profile : ""});
    try {
      worker->start();
    } catch (const Error&) {
    }
  }
  Catalog cat = load_catalog(a.catalog, a.profile);
  // Pipelines run in this process, never in a worker: the catalogue the workers read needs no change.
  if (a.steps > 0)
    for (auto& pl : cat.pipelines) pl.set_steps(a.steps);
  const Selection sel{a.backend, a.ops, a.variants, a.configs, a.pipelines};
  const auto cases = plan_cases(cat, Registry::global(), sel);
  const auto pipelines = plan_pipelines(cat, sel);
  if (a.steps > 0 && pipelines.empty())
    fail_usage("--steps sets the steps of the pipelines, and this run has none (--pipeline GLOB selects them)");
  if (!a.save_outputs.empty()) {
    // Every place the outputs go, the controls' included, is checked before the store is
    // created or migrated: an output folder that cannot be written leaves the store untouched.
    std::vector<PlannedCase> all = a.no_canaries ? std::vector<PlannedCase>{} : canary_cases(cases, Registry::global(), pipelines);
    all.insert(all.end(), cases.begin(), cases.end());
    check_saved_outputs(a.save_outputs, all);
  }
  // Without isolation's executable the run fails here, before the store is created or migrated.
  if (!a.no_isolation && !worker)
    fail_environment("cannot find this executable (/proc/self/exe) to start worker processes; --no-isolation runs without");
  Store store = Store::open(a.db, Store::Mode::read_write);
  if (!store.notice().empty()) std::fprintf(stderr, "d9m: %s\n", store.notice().c_str());
  check_fingerprint_ids(store);  // no evidence added to an edited store (nor a verdict unreadable after the run)
  RunOptions opt;
  opt.resume = a.resume;
  opt.case_timeout_s = a.timeout;
  opt.worker = worker;  // null: --no-isolation
  opt.trials = a.trials;
  opt.threads = a.threads;
  opt.progress = isatty(STDERR_FILENO) != 0;
  opt.canaries = !a.no_canaries;
  if (!a.save_outputs.empty()) opt.save_outputs = a.save_outputs;
  opt.arguments_json = json_text(nlohmann::json(a.argv));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const RunSummary s = run_audit(cat, cases, store, opt, pipelines);
  if (s.resumes > 0)
    std::fprintf(stderr, "d9m: resumed run %s (resumption %lld): %lld cases were stored before, kept as they are\n",
                 s.run_id.c_str(), static_cast<long long>(s.resumes), static_cast<long long>(s.resumed_cases));
  else if (a.resume && s.resume_busy > 0)
    std::fprintf(stderr, "d9m: --resume: %d matching run(s) are being run or resumed by another process; started a new run\n",
                 s.resume_busy);
  else if (a.resume)
    std::fprintf(stderr, "d9m: --resume: no interrupted run of these cases, N and threads; started a new run\n");
  std::fprintf(stderr, "d9m: run %s: %lld cases into %s\n", s.run_id.c_str(), static_cast<long long>(s.cases), a.db.c_str());
  // The run's verdict: read back from the store, over the cases it recorded with every run's
  // evidence for them (an earlier run's other digest is a divergence this run alone cannot see).
  // After the lines above: a store that cannot be read back still names the run it holds.
  const ReportData data = load_run_evidence(store, s.run_id);
  const StatusModel model = build_status_model(data);
  if (!a.quiet) std::cout << render_markdown(data, model);
  if (s.interrupted) {
    std::fprintf(stderr, "d9m: interrupted; the run is marked interrupted in the store (`d9m run --resume` with the same arguments continues it)\n");
    return 130;
  }
  for (const auto& f : model.verdict.failures)
    std::fprintf(stderr, "d9m: FAIL: %s: %s\n", to_string(f.kind).c_str(), f.text.c_str());
  if (!model.verdict.held()) return static_cast<int>(ExitCode::claim_broken);
  if (model.verdict.certifies_nothing()) std::fprintf(stderr, "d9m: NO EVIDENCE: %s\n", model.verdict.no_evidence().c_str());
  // CTest's skip: the run certified nothing it selected, every case but d9m's controls SKIPPED or
  // UNSUPPORTED (no device, a config the variant does not take, too little free memory). Found by
  // review: an UNSUPPORTED case passed, since the controls beside it had run.
  if (a.ctest) {
    bool selected = false, certified = false;
    for (const auto& r : data.results)
      if (!r.is_control()) {
        selected = true;
        certified |= r.status != Status::skipped && r.status != Status::unsupported;
      }
    if (selected && !certified) return 77;
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app, std::vector<Verb>& verbs, const std::vector<std::string>& argv) {
  auto o = std::make_shared<RunArgs>();
  o->argv = argv;
  auto* c = app.add_subcommand("run", "run the audit and store the evidence");
  c->add_option("-n,--trials", o->trials, "trials per case (at least 2)")->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 30));
  c->add_option("--backend", o->backend, "cpu, cuda, torch or all (cpu and cuda), or a comma-separated list")
      ->check(CLI::Validator(backend_list_error, "BACKENDS"));
  c->add_option("--op", o->ops, "only ops matching these globs");
  c->add_option("--variant", o->variants, "only variants matching these globs");
  c->add_option("--config", o->configs, "only configs matching these globs");
  c->add_option("--pipeline", o->pipelines,
                "only pipelines matching these globs (alone: no config runs; without it, --op, --variant and --config run no pipeline)");
  c->add_option("--steps", o->steps,
                "steps a trial for every pipeline of the run, instead of the catalogue's (the case's config is then N_steps)")
      ->check(CLI::Range(std::int64_t{1}, kMaxPipelineSteps));
  c->add_option("--threads", o->threads, "CPU worker threads")->check(CLI::Range(1u, 1024u));
  c->add_option("--db", o->db, "store file");
  auto* catalog = c->add_option("--catalog", o->catalog, "catalogue JSON replacing the built-in one");
  c->add_option("--profile", o->profile, "built-in catalogue profile: quick, default or models")->excludes(catalog);
  c->add_option("--save-outputs", o->save_outputs, "write inputs and first outputs as .npy under this folder");
  c->add_flag("-q,--quiet", o->quiet, "print no status table at the end");
  c->add_flag("--no-canaries", o->no_canaries, "leave out the deterministic and nondeterministic controls");
  c->add_flag("--ctest", o->ctest, "exit 77 (CTest's skip) when every selected case but the controls was SKIPPED or UNSUPPORTED");
  c->add_option("--timeout", o->timeout,
                "watchdog: a case whose next trial takes longer than this many seconds is stopped and is an ERROR")
      ->check(CLI::Range(0.1, 1e7))
      ->check(finite_seconds());
  c->add_flag("--no-isolation", o->no_isolation,
              "run cases in this process, not in a worker process (for debuggers; a crash then ends the run)");
  c->add_flag("--resume", o->resume,
              "continue the newest interrupted run of the same cases, N and threads (a new run if there is none)");
  verbs.push_back({c, [o] { return run(*o); }});
}

}  // namespace d9m::cli
