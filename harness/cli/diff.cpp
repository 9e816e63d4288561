// d9m diff: what changed between two stores, runs or stacks; exit 1 when a deterministic claim
// regressed.
#include <cmath>
#include <cstdio>
#include <memory>

#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/error.h"
#include "harness/report/compare.h"

namespace d9m::cli {
namespace {

struct DiffArgs {
  std::string a, b, output;
  double timing_tolerance = 0.25;
};

int diff(const DiffArgs& a) {
  // NaN compares false with everything, so it silently turned timing changes off; a negative
  // tolerance called every case slower. Neither is a tolerance.
  if (!std::isfinite(a.timing_tolerance) || a.timing_tolerance < 0) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", a.timing_tolerance);
    fail_usage(std::string("--timing-tolerance must be a finite number of at least 0 (0.25 means 25%), got ") + got);
  }
  check_output(a.output, {a.a, a.a.substr(0, a.a.rfind('@')), a.b, a.b.substr(0, a.b.rfind('@'))});
  const DiffReport d = diff_reports(load_operand(a.a), load_operand(a.b), a.timing_tolerance);
  // Found by review: a diff that compared nothing (an empty store, another catalogue's cases)
  // said "No deterministic claim regressed" and exited 0, as a baseline that checks nothing would.
  if (d.compared_cases == 0 && d.regressions.empty())
    fail_usage(a.a + " and " + a.b + " have no case in common (d9m's controls aside: " + std::to_string(d.compared) +
               " compared; only in A: " + std::to_string(d.only_a.size()) + ", only in B: " + std::to_string(d.only_b.size()) +
               "), so nothing was compared: are they of the same catalogue, and did both runs record cases?");
  write_output(a.output, render_diff(d, a.a, a.b));
  return d.regressions.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
}

}  // namespace

void add_diff(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<DiffArgs>();
  auto* c = app.add_subcommand("diff", "what changed between two stores, runs or stacks");
  c->add_option("a", o->a, "STORE[@SELECTOR]: selector S1, a fingerprint prefix, a host or run:<id prefix>")->required();
  c->add_option("b", o->b, "STORE[@SELECTOR]")->required();
  c->add_option("--timing-tolerance", o->timing_tolerance, "relative timing change that counts (default 0.25)");
  c->add_option("-o,--output", o->output, "file to write (default: standard output)");
  verbs.push_back({c, [o] { return diff(*o); }});
}

}  // namespace d9m::cli
