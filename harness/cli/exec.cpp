// d9m exec: a user's program N times in fresh processes, its outputs (and its PyTorch trace)
// digested and stored as a run (harness/exec/program.h). Exit 1 when an output differs.
#include <cstdio>
#include <memory>

#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/error.h"
#include "harness/core/json_text.h"
#include "harness/exec/program.h"
#include "harness/store/store.h"

namespace d9m::cli {
namespace {

struct ExecArgs {
  ProgramOptions opt;
  std::string db = "d9m.sqlite";
  std::vector<std::string> argv;
};

int exec(ExecArgs& a) {
  a.opt.arguments_json = json_text(nlohmann::json(a.argv));
  // Every trial first: a command that fails, or an output it does not write, stores nothing.
  const ProgramTrials trials = run_program_trials(a.opt);
  Store store = Store::open(a.db, Store::Mode::read_write);
  if (!store.notice().empty()) std::fprintf(stderr, "d9m: %s\n", store.notice().c_str());
  const std::string run = store_program(a.opt, trials, store);
  bool diverged = false;
  std::printf("# d9m exec: %lld trials of `", static_cast<long long>(a.opt.trials));
  for (std::size_t i = 0; i < a.opt.command.size(); ++i) std::printf("%s%s", i ? " " : "", a.opt.command[i].c_str());
  std::printf("`, run %s in %s\n", run.c_str(), a.db.c_str());
  auto line = [&](const std::string& name, const std::vector<std::string>& digests, const std::vector<std::optional<DiffStats>>& diffs) {
    std::vector<std::string> distinct;
    for (const auto& d : digests)
      if (std::find(distinct.begin(), distinct.end(), d) == distinct.end()) distinct.push_back(d);
    std::int64_t most = 0;
    for (const auto& d : diffs)
      if (d) most = std::max(most, d->count);
    diverged |= distinct.size() > 1;
    if (distinct.size() == 1)
      std::printf("D      %s\n", name.c_str());
    else
      std::printf("ND %zu/%zu %s  (up to %lld element(s) differ from trial 0)\n", distinct.size(), digests.size(), name.c_str(),
                  static_cast<long long>(most));
  };
  for (const auto& o : trials.outputs) line(o.name, o.digests, o.diffs);
  if (trials.trace) {
    line("trace (about " + std::to_string(trials.trace->rows.size() / trials.trace->digests.size()) + " traced ops per trial)",
         trials.trace->digests, trials.trace->diffs);
    if (diverged) std::printf("# `d9m trace diff --db %s` names the first traced op that diverged\n", a.db.c_str());
  }
  return diverged ? static_cast<int>(ExitCode::claim_broken) : 0;
}

}  // namespace

void add_exec(CLI::App& app, std::vector<Verb>& verbs, const std::vector<std::string>& argv) {
  auto o = std::make_shared<ExecArgs>();
  o->argv = argv;
  auto* c = app.add_subcommand("exec", "run a program of your own N times in fresh processes and compare its outputs (exit 1: one differs)");
  c->add_option("-n,--trials", o->opt.trials, "trials (processes), at least 2")->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20));
  // One glob an occurrence, as the usage says: a vector option taking several would take the `--`
  // before the command as the end of its own list, and parse the command's options as d9m's.
  c->add_option("--outputs", o->opt.outputs, "output file (a glob, relative to the working directory; repeat for more); .npy and .safetensors per tensor; each trial must write them anew")
      ->allow_extra_args(false);
  c->add_option("--name", o->opt.name, "the cases' name, exec:NAME (default: the script or program)");
  c->add_option("--timeout", o->opt.timeout_s, "a trial running longer than this many seconds is killed and nothing is stored (default: no limit)")
      ->check(CLI::Range(0.001, 1e7))
      ->check(finite_seconds());
  c->add_option("--db", o->db, "store file");
  c->add_option("command", o->opt.command, "-- COMMAND ARGS...")->required();
  c->footer("Every trial gets the same standard input: a file given with < FILE, read from where it stood, or else /dev/null\n"
            "(a terminal or a pipe cannot be replayed).");
  c->prefix_command(false);
  verbs.push_back({c, [o] { return exec(*o); }});
}

}  // namespace d9m::cli
