// d9m: parses the command line, runs the verb it names (one function each, cli/verbs.h) and
// turns an error into its exit code (core/error.h).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "harness/cli/verbs.h"
#include "harness/core/error.h"
#include "harness/core/fingerprint.h"

namespace d9m::cli {
namespace {

int main_impl(int argc, char** argv) {
  CLI::App app{"d9m: audits and certifies the determinism of deep-learning ops"};
  app.require_subcommand(1);
  app.set_version_flag("--version", d9m_version() + " (" + d9m_commit() + ")");
  std::vector<Verb> verbs;
  add_list(app, verbs);
  add_fingerprint(app, verbs);
  add_run(app, verbs, std::vector<std::string>(argv, argv + argc));
  add_worker(app, verbs);
  add_report(app, verbs);
  add_merge(app, verbs);
  add_diff(app, verbs);
  add_baseline(app, verbs);
  add_attest(app, verbs);
  add_verify(app, verbs);
  add_trace(app, verbs);
  add_exec(app, verbs, std::vector<std::string>(argv, argv + argc));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }
  for (const auto& v : verbs)
    if (v.command->parsed()) return v.run();
  return static_cast<int>(ExitCode::usage);
}

}  // namespace
}  // namespace d9m::cli

int main(int argc, char** argv) {
  // Past a file size limit (ulimit -f) a write must fail with EFBIG, which the store reports and
  // survives, instead of SIGXFSZ killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return d9m::cli::main_impl(argc, argv);
  } catch (const d9m::Error& e) {
    std::fprintf(stderr, "d9m: %s%s\n", d9m::prefix_of(e.category()), e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "d9m: internal error: %s\n", e.what());
    return static_cast<int>(d9m::ExitCode::environment);
  }
}
