// Reports from a store written by hand: statuses, the verdict, and cross-implementation claims.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "harness/core/catalog.h"
#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/report/compare.h"
#include "harness/report/format.h"
#include "harness/report/model.h"
#include "harness/report/report.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace d9m {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::string path = (fs::temp_directory_path() / ("d9m_report_test_" + std::to_string(::getpid()) + ".sqlite")).string();
  Fixture() { fs::remove(path); }
  ~Fixture() {
    for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
  }
};

// The role a test variant is written with: the name says it in these tests only.
std::string role_of(const std::string& variant) {
  if (variant == "cpu.serial") return "reference";
  if (variant.starts_with("torch.")) return "framework";
  if (variant == "cpu.atomic") return "atomic";
  return "ordered";
}

// One case on one stack whose every trial has the given digests.
void put(Store& s, const std::string& run, const std::string& variant, const std::string& claim,
         const std::vector<std::string>& digests, const std::string& bit_equal_to = "", const std::string& config = "cfg") {
  CaseRecord rec{"", "scatter_add", variant, "cpu", config, "cid", "{}", 1, "inputs", "float32", "[4]"};
  rec.id = Store::case_id(rec);
  std::vector<TrialRecord> ts;
  for (std::size_t t = 0; t < digests.size(); ++t)
    ts.push_back({static_cast<std::int64_t>(t), digests[t], 1000 + static_cast<std::int64_t>(t),
                  digests[t] == digests[0] ? std::nullopt : std::optional<DiffStats>(DiffStats{1, 0.5, 3, 2})});
  std::set<std::string> distinct(digests.begin(), digests.end());
  CaseRunRecord cr{distinct.size() == 1 ? Status::deterministic : Status::nondeterministic, "", claim, "design", "why",
                   bit_equal_to, static_cast<std::int64_t>(digests.size()), static_cast<std::int64_t>(distinct.size()), 1000, 1000,
                   role_of(variant)};
  s.put_case(run, rec, cr, ts);
}

// A run on the stack whose fingerprint is `fp`.
std::string begin(Store& s, const nlohmann::json& fp = {{"stack", 1}}) {
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "cat", 3, 1};
  return s.begin_run(fingerprint_from_json(fp), info);
}

// The fingerprint of a run that also drove PyTorch on the stack {"stack": n}.
nlohmann::json with_torch(int n) { return {{"stack", n}, {"torch", {{"torch", "2.11.0"}}}}; }

TEST(Report, VerdictAndCellsFollowTheEvidence) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  put(s, run, "cpu.atomic", "nondeterministic", {"a", "b", "c"});
  put(s, run, "cpu.serial", "deterministic", {"x", "x", "x"});
  put(s, run, "cpu.ordered", "deterministic", {"x", "x", "x"}, "cpu.serial");
  s.finish_run(run, "complete");
  const ReportData d = load_report_data(s);
  const StatusModel m = build_status_model(d);
  EXPECT_TRUE(m.verdict.held());
  const std::string md = render_markdown(d, m);
  EXPECT_NE(md.find("| scatter_add | cpu.atomic | ND (design) | ND 3/3 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| scatter_add | cpu.ordered | cpu.serial | S1 | 1 of 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("PASS: every claim held"), std::string::npos);
  const auto j = nlohmann::json::parse(render_json(d, m));
  EXPECT_EQ(j["schema"], "d9m.report/1");
  EXPECT_EQ(j["cross_implementation"].size(), 1u);
  EXPECT_TRUE(j["cross_implementation"][0]["equal"].get<bool>());
}

TEST(Report, BrokenDeterminismAndBrokenCrossClaimsFailTheVerdict) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  put(s, run, "cpu.serial", "deterministic", {"x", "x", "x"});
  put(s, run, "cpu.ordered", "deterministic", {"y", "y", "y"}, "cpu.serial");  // deterministic, but not the claimed bits
  put(s, run, "cpu.blocked", "deterministic", {"x", "z", "x"});                 // diverged
  s.finish_run(run, "complete");
  const ReportData d = load_report_data(s);
  const StatusModel m = build_status_model(d);
  ASSERT_EQ(m.verdict.failures.size(), 2u);
  const std::string md = render_markdown(d, m);
  EXPECT_NE(md.find("**ND 2/3** (claim broken)"), std::string::npos) << md;
  EXPECT_NE(md.find("**0 of 1** (claim broken)"), std::string::npos) << md;
  // The footer says what it counts: one of each kind.
  EXPECT_NE(md.find("FAIL: 2 failure(s): 1 claim broken, 1 cross-implementation claim broken"), std::string::npos) << md;
  EXPECT_FALSE(nlohmann::json::parse(render_json(d, m))["verdict"]["passed"].get<bool>());
}

// Cross-implementation rows are listed by stack as numbered: S2 before S10 (they sorted as text).
TEST(Report, CrossRowsFollowTheStacksNumbers) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  for (int n = 1; n <= 10; ++n) {
    const std::string run = begin(s, {{"stack", n}});
    put(s, run, "cpu.serial", "deterministic", {"x", "x"});
    put(s, run, "cpu.ordered", "deterministic", {"x", "x"}, "cpu.serial");
    s.finish_run(run, "complete");
  }
  const ReportData d = load_report_data(s);
  ASSERT_EQ(d.stacks.size(), 10u);
  const std::string md = render_markdown(d, build_status_model(d));
  const auto s2 = md.find("| scatter_add | cpu.ordered | cpu.serial | S2 |"), s10 = md.find("| scatter_add | cpu.ordered | cpu.serial | S10 |");
  ASSERT_NE(s2, std::string::npos) << md;
  ASSERT_NE(s10, std::string::npos) << md;
  EXPECT_LT(s2, s10);
}

// A GPU run beside PyTorch's kernels records PyTorch in its fingerprint, a CPU run on the same
// machine does not: two stacks that differ only there. d9m's own variants still check each
// other's bits across them (the H200 audit's GPU and CPU runs were on S1 and S2), and a broken
// claim across them fails the verdict; a stack that differs in anything else is not paired.
TEST(Report, CrossClaimsAreCheckedAcrossStacksThatDifferOnlyInPyTorch) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string cpu_run = begin(s);
  put(s, cpu_run, "cpu.serial", "deterministic", {"x", "x", "x"});
  s.finish_run(cpu_run, "complete");
  const std::string gpu_run = begin(s, with_torch(1));
  put(s, gpu_run, "cpu.ordered", "deterministic", {"x", "x", "x"}, "cpu.serial");
  put(s, gpu_run, "cpu.blocked", "deterministic", {"y", "y", "y"}, "cpu.serial");  // not the claimed bits
  s.finish_run(gpu_run, "complete");
  const std::string other = begin(s, with_torch(2));
  put(s, other, "cpu.fixed", "deterministic", {"y", "y", "y"}, "cpu.serial");  // another machine: nothing to pair with
  s.finish_run(other, "complete");
  const ReportData d = load_report_data(s);
  const StatusModel m = build_status_model(d);
  ASSERT_EQ(m.cross.size(), 2u);
  for (const auto& c : m.cross) EXPECT_NE(c.partner_stack, c.result->stack);
  // Stack labels follow the runs' start times, equal here: name them from the data.
  const std::string gpu_stack = d.stack(m.cross[0].result->stack).label, cpu_stack = d.stack(m.cross[0].partner_stack).label;
  ASSERT_EQ(m.verdict.failures.size(), 1u);
  EXPECT_EQ(m.verdict.failures[0].kind, Failure::Kind::cross_implementation);
  EXPECT_NE(m.verdict.failures[0].text.find("claims the bits of cpu.serial (on " + cpu_stack + ")"), std::string::npos)
      << m.verdict.failures[0].text;
  const std::string md = render_markdown(d, m);
  const std::string stacks = " | " + gpu_stack + " with " + cpu_stack + " | ";
  EXPECT_NE(md.find("| scatter_add | cpu.ordered | cpu.serial" + stacks + "1 of 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| scatter_add | cpu.blocked | cpu.serial" + stacks + "**0 of 1** (claim broken) |"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(render_json(d, m));
  EXPECT_EQ(j["cross_implementation"].size(), 2u);
  EXPECT_EQ(j["cross_implementation"][0]["partner_stack"], m.cross[0].partner_stack);
  // A report of the claimants' stack alone cannot check them: its verdict says so, rather than
  // reading as if every claim had held.
  ReportData part = load_report_data(s);
  select_stacks(part, {gpu_stack});
  const Verdict pv = verdict_of(part);
  ASSERT_EQ(pv.warnings.size(), 1u);
  EXPECT_NE(pv.warnings[0].find("2 claim(s) to another implementation's bits had no partner in this selection"), std::string::npos)
      << pv.warnings[0];
  // The whole store: only cpu.fixed, on a machine that ran nothing it claims the bits of, was not
  // checked, and the verdict says so (found by review: "each claim ... held" with none checked).
  const Verdict whole = verdict_of(d);
  ASSERT_EQ(whole.warnings.size(), 1u);
  EXPECT_EQ(whole.unpaired_claims, 1);
  EXPECT_NE(whole.warnings[0].find("1 claim(s) to another implementation's bits had no partner in the results and were not checked"),
            std::string::npos)
      << whole.warnings[0];
}

// The nondeterministic control is judged run by run: a run at one thread whose control never
// diverged could not have seen nondeterminism, even where another run's control diverged (found
// by review: the combined control was ND, so the 1-thread run's D cases drew no warning).
TEST(Report, AQuietControlIsWarnedOfInTheRunWhereItWasQuiet) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string noisy = begin(s);
  put(s, noisy, "cpu.atomic", "nondeterministic", {"a", "b", "c"}, "", kCanaryConfig);
  s.finish_run(noisy, "complete");
  const std::string quiet = begin(s);
  put(s, quiet, "cpu.atomic", "nondeterministic", {"a", "a", "a"}, "", kCanaryConfig);
  put(s, quiet, "cpu.ordered", "deterministic", {"x", "x", "x"});
  s.finish_run(quiet, "complete");
  const ReportData d = load_report_data(s);
  const Verdict v = verdict_of(d);
  ASSERT_EQ(v.warnings.size(), 1u) << (v.warnings.empty() ? "" : v.warnings[0]);
  EXPECT_NE(v.warnings[0].find("the nondeterministic control (cpu.atomic on S1) never diverged in run(s) " + quiet.substr(0, 12)),
            std::string::npos)
      << v.warnings[0];
  EXPECT_EQ(v.warnings[0].find(noisy.substr(0, 12)), std::string::npos) << v.warnings[0];
}

// A run of a variant claiming cpu.serial's bits, without cpu.serial: the claim is not checked, and
// the PASS line says which claims held rather than "each claim to another implementation's bits".
TEST(Report, APassWithAClaimLeftUncheckedSaysSo) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  put(s, run, "cpu.ordered", "deterministic", {"x", "x", "x"}, "cpu.serial");
  s.finish_run(run, "complete");
  const Verdict v = verdict_of(load_report_data(s));
  ASSERT_TRUE(v.held());
  EXPECT_EQ(v.unpaired_claims, 1);
  const auto lines = v.lines();
  const std::string all = std::accumulate(lines.begin(), lines.end(), std::string(), [](std::string a, const std::string& b) { return a + b + "\n"; });
  EXPECT_NE(all.find("each claim to another implementation's bits that had its partner (1 had none: not checked) held"), std::string::npos) << all;
  EXPECT_NE(all.find("WARNING: 1 claim(s) to another implementation's bits had no partner"), std::string::npos) << all;
}

// A framework's own kernels depend on the framework's version, in which such stacks differ: a
// claim to one of them is checked on its own stack only. A framework kernel's claim to d9m's own
// bits is checked across them (the partner's bits do not depend on the framework).
TEST(Report, AFrameworkKernelsBitsArePairedOnItsOwnStackOnly) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string a = begin(s, with_torch(1));
  put(s, a, "torch.deterministic", "deterministic", {"x", "x", "x"});
  put(s, a, "cpu.serial", "deterministic", {"x", "x", "x"});
  s.finish_run(a, "complete");
  const std::string b = begin(s, {{"stack", 1}, {"torch", {{"torch", "2.12.0"}}}});
  put(s, b, "torch.default", "deterministic", {"y", "y", "y"}, "torch.deterministic");
  put(s, b, "cpu.ordered", "deterministic", {"y", "y", "y"}, "torch.deterministic");
  put(s, b, "torch.compiled", "deterministic", {"z", "z", "z"}, "cpu.serial");
  s.finish_run(b, "complete");
  const ReportData d = load_report_data(s);  // the model points into it
  const StatusModel m = build_status_model(d);
  ASSERT_EQ(m.cross.size(), 1u);
  EXPECT_EQ(m.cross[0].result->variant, "torch.compiled");
  EXPECT_EQ(m.cross[0].partner, "cpu.serial");
  ASSERT_EQ(m.verdict.failures.size(), 1u);
  EXPECT_EQ(m.verdict.failures[0].kind, Failure::Kind::cross_implementation);
}

// A claimant whose own stack has the partner is checked against that one only, even where a
// stack differing only in PyTorch has the partner with other bits.
TEST(Report, ACrossClaimPairsWithItsOwnStackFirst) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string plain = begin(s);
  put(s, plain, "cpu.serial", "deterministic", {"z", "z", "z"});
  s.finish_run(plain, "complete");
  const std::string torch_run = begin(s, with_torch(1));
  put(s, torch_run, "cpu.serial", "deterministic", {"x", "x", "x"});
  put(s, torch_run, "cpu.ordered", "deterministic", {"x", "x", "x"}, "cpu.serial");
  s.finish_run(torch_run, "complete");
  const ReportData d = load_report_data(s);
  const StatusModel m = build_status_model(d);
  ASSERT_EQ(m.cross.size(), 1u);
  EXPECT_EQ(m.cross[0].partner_stack, m.cross[0].result->stack);
  EXPECT_TRUE(m.cross[0].equal());
  EXPECT_TRUE(m.verdict.held());
}

// Writes a case of the controls' config (_canary).
void put_canary(Store& s, const std::string& run, const std::string& variant, const std::string& claim,
                const std::vector<std::string>& digests) {
  CaseRecord rec{"", "unsorted_segment_sum", variant, "cpu", "_canary", "cid", "{}", 42, "inputs", "float32", "[4,8]"};
  rec.id = Store::case_id(rec);
  std::vector<TrialRecord> ts;
  for (std::size_t t = 0; t < digests.size(); ++t)
    ts.push_back({static_cast<std::int64_t>(t), digests[t], 1000, digests[t] == digests[0] ? std::nullopt : std::optional<DiffStats>(DiffStats{1, 1, 1, 0})});
  std::set<std::string> distinct(digests.begin(), digests.end());
  s.put_case(run, rec,
             {distinct.size() == 1 ? Status::deterministic : Status::nondeterministic, "", claim, "design", "control", "",
              static_cast<std::int64_t>(digests.size()), static_cast<std::int64_t>(distinct.size()), 1000, 1000, role_of(variant)},
             ts);
}

TEST(Report, ANondeterministicControlThatNeverDivergedIsAWarning) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  put_canary(s, run, "cpu.serial", "deterministic", {"x", "x", "x"});
  put_canary(s, run, "cpu.atomic", "nondeterministic", {"y", "y", "y"});
  s.finish_run(run, "complete");
  const Verdict v = verdict_of(load_report_data(s));
  EXPECT_TRUE(v.held());
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("could not have seen nondeterminism"), std::string::npos);
  const ReportData d = load_report_data(s);
  EXPECT_NE(render_markdown(d, build_status_model(d)).find("# WARNING: the nondeterministic control"), std::string::npos);
}

TEST(Report, ADivergingDeterministicControlFailsTheAudit) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  put_canary(s, run, "cpu.serial", "deterministic", {"x", "z", "x"});
  put_canary(s, run, "cpu.atomic", "nondeterministic", {"a", "b", "c"});
  s.finish_run(run, "complete");
  const Verdict v = verdict_of(load_report_data(s));
  EXPECT_FALSE(v.held());
  EXPECT_TRUE(v.warnings.empty());
  // Listed once, as the control (it is also a deterministic claim that diverged).
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_EQ(v.failures[0].kind, Failure::Kind::control_diverged);
  EXPECT_NE(v.failures[0].text.find("the deterministic control"), std::string::npos);
}

TEST(Report, RunsOfOneStackAddUpAndDStatesItsBound) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  for (int k = 0; k < 2; ++k) {
    const std::string run = begin(s);
    put(s, run, "cpu.serial", "deterministic", {"x", "x", "x"});
    s.finish_run(run, "complete");
  }
  const ReportData d = load_report_data(s);
  ASSERT_EQ(d.results.size(), 1u);
  EXPECT_EQ(d.results[0].trials, 6);
  EXPECT_EQ(d.results[0].runs, 2);
  EXPECT_NEAR(d.results[0].bound95(), 1 - std::pow(0.05, 1.0 / 5), 1e-12);
}

// A stack that loaded an older cuDNN minor (or another major) than d9m was built against is
// named in the verdict's warnings; a newer minor, or no cuDNN at all, is not.
TEST(Report, WarnsOfACudnnOlderThanTheBuild) {
  const auto stack = [](const char* label, nlohmann::json cuda) {
    StackInfo s;
    s.id = label;
    s.label = label;
    s.fingerprint = {{"cuda", std::move(cuda)}};
    return s;
  };
  ReportData d;
  d.stacks.push_back(stack("S1", {{"cudnn_compiled", "9.19.0"}, {"cudnn_loaded", "9.14.0"}}));
  d.stacks.push_back(stack("S2", {{"cudnn_compiled", "9.14.0"}, {"cudnn_loaded", "9.19.1"}}));
  d.stacks.push_back(stack("S3", {{"cudnn_compiled", "9.19.0"}, {"cudnn_loaded", "10.0.0"}}));
  d.stacks.push_back(stack("S4", nlohmann::json::object()));
  d.stacks.push_back(stack("S5", {{"cudnn_compiled", "9.19.0"}, {"cudnn_loaded", nullptr}}));
  const Verdict v = verdict_of(d);
  ASSERT_EQ(v.warnings.size(), 2u);
  EXPECT_NE(v.warnings[0].find("cuDNN 9.14.0 was loaded on S1 by a d9m built against 9.19.0"), std::string::npos) << v.warnings[0];
  EXPECT_NE(v.warnings[1].find("on S3"), std::string::npos) << v.warnings[1];
}

// A store is anyone's file: a fingerprint or parameters edited into JSON nested 100,000 deep (or
// not JSON at all) must still render in every format (it crashed `report --format json` with a
// stack overflow); `d9m verify` is what names such rows. (The fingerprint's id is edited with it:
// one whose id no longer matches is refused, below.)
TEST(Report, RendersAStoreWhoseJsonFieldsWereEditedIntoSomethingUnreadable) {
  Fixture f;
  {
    Store s = Store::open(f.path, Store::Mode::read_write);
    const std::string run = begin(s);
    put(s, run, "cpu.serial", "deterministic", {"x", "x", "x"});
    s.finish_run(run, "complete");
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    sql::exec(s.db(), "PRAGMA foreign_keys = OFF");
    sql::Statement(s.db(), "UPDATE fingerprints SET canonical = ?, id = ?").bind(1, deep).bind(2, sha256_hex(deep)).run();
    sql::Statement(s.db(), "UPDATE runs SET fingerprint_id = ?").bind(1, sha256_hex(deep)).run();
    sql::exec(s.db(), "UPDATE cases SET params = '{not json'");
  }
  Store s = Store::open(f.path, Store::Mode::read_only);
  const ReportData d = load_report_data(s);
  const StatusModel m = build_status_model(d);
  const auto j = nlohmann::json::parse(render_json(d, m));
  EXPECT_TRUE(j["stacks"][0]["fingerprint"].is_null());
  EXPECT_TRUE(j["results"][0]["params"].is_null());
  EXPECT_FALSE(render_markdown(d, m, true).empty());
  EXPECT_FALSE(render_html(d, m, true).empty());
  EXPECT_FALSE(render_junit(d, m).empty());
  EXPECT_FALSE(render_csv(d, m).empty());
}

// A fingerprint edited in place (its canonical text, not its id) would be a stack of its own and
// unpair the claims checked across stacks, so that a plain report passed without them: every
// report refuses it, naming the fingerprint, as `d9m verify` does.
TEST(Report, RefusesAFingerprintWhoseIdDoesNotMatchItsContent) {
  Fixture f;
  {
    Store s = Store::open(f.path, Store::Mode::read_write);
    const std::string run = begin(s);
    put(s, run, "cpu.serial", "deterministic", {"x", "x", "x"});
    s.finish_run(run, "complete");
    sql::exec(s.db(), "UPDATE fingerprints SET canonical = replace(canonical, '1', '7')");  // {"stack": 7}
  }
  Store s = Store::open(f.path, Store::Mode::read_only);
  try {
    load_report_data(s);
    ADD_FAILURE() << "an edited fingerprint was rendered";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::store_fault);
    EXPECT_NE(std::string(e.what()).find(": its id does not match its content (the store was edited)"), std::string::npos) << e.what();
  }
}

// A stack-to-stack difference names the precision: two configs of one name at f32 and bf16 were
// two rows that read the same ("scatter_add | x"), found by review.
TEST(Report, StackDifferencesNameThePrecision) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  for (int stack = 1; stack <= 2; ++stack) {
    const std::string run = begin(s, {{"stack", stack}});
    for (const char* dtype : {"f32", "bf16"}) {
      CaseRecord rec{"", "scatter_add", "cpu.ordered", "cpu", "x", "cid", "{}", 1, "inputs", "float32", "[4]"};
      rec.dtype = dtype;
      rec.id = Store::case_id(rec);
      const std::string digest = std::string(dtype) + "-on-" + std::to_string(stack);
      std::vector<TrialRecord> ts{{0, digest, 1000, std::nullopt}, {1, digest, 1000, std::nullopt}};
      s.put_case(run, rec, CaseRunRecord{Status::deterministic, "", "deterministic", "design", "why", "", 2, 1, 1000, 1000, "ordered"}, ts);
    }
    s.finish_run(run, "complete");
  }
  const ReportData d = load_report_data(s);
  const StatusModel m = build_status_model(d);
  ASSERT_EQ(m.stack_differences.size(), 2u);
  const std::string md = render_markdown(d, m);
  EXPECT_NE(md.find("| scatter_add | x | cpu.ordered | S1 vs S2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| scatter_add bf16 | x | cpu.ordered | S1 vs S2 |"), std::string::npos) << md;
  const std::string html = render_html(d, m);
  EXPECT_NE(html.find("<tr><td>scatter_add bf16</td><td>x</td>"), std::string::npos);
  const auto j = nlohmann::json::parse(render_json(d, m));
  std::set<std::string> dtypes, sources;
  for (const auto& row : j["stack_differences"]) {
    dtypes.insert(row["dtype"].get<std::string>());
    sources.insert(row["source"].get<std::string>());
    EXPECT_EQ(row["math"], "default");
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"f32", "bf16"}));
  EXPECT_EQ(sources, (std::set<std::string>{"scatter_add", "scatter_add bf16"}));
}

// A report of selected stacks counts the runs of those stacks only, with their N and threads, and
// its audit form renders (found by audit: the header said 5 runs at N 3 and 6 for a stack of 2
// runs at N 6, and --audit failed with "unknown stack" on a run of a stack left out).
TEST(Report, ASelectionOfStacksCountsItsOwnRunsOnly) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  for (int stack = 1; stack <= 2; ++stack)
    for (int k = 0; k < stack + 1; ++k) {
      RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "cat", stack == 1 ? 3 : 6, stack};
      const std::string run = s.begin_run(fingerprint_from_json({{"stack", stack}}), info);
      put(s, run, "cpu.serial", "deterministic", std::vector<std::string>(static_cast<std::size_t>(info.trials_per_case), "x"));
      s.finish_run(run, "complete");
    }
  ReportData d = load_report_data(s);
  ASSERT_EQ(d.runs, 5);
  const std::string s2 = d.stacks[0].fingerprint == nlohmann::json{{"stack", 2}} ? d.stacks[0].label : d.stacks[1].label;
  select_stacks(d, {s2});
  EXPECT_EQ(d.runs, 3);
  EXPECT_EQ(d.run_rows.size(), 3u);
  EXPECT_EQ(d.trials_per_case, std::vector<std::int64_t>{6});
  EXPECT_EQ(d.threads, std::vector<std::int64_t>{2});
  const StatusModel m = build_status_model(d);
  const std::string md = render_markdown(d, m, true);
  EXPECT_NE(md.find("runs: 3 (0 interrupted)"), std::string::npos) << md.substr(0, 600);
  EXPECT_NE(md.find("trials per case: 6 "), std::string::npos) << md.substr(0, 600);
  EXPECT_NO_THROW(render_html(d, m, true));
  const auto j = nlohmann::json::parse(render_json(d, m));
  EXPECT_EQ(j["runs"], 3);
  EXPECT_EQ(j["trials_per_case"], nlohmann::json::array({6}));
}

// A name with '|', a newline or '<' (a store written by another tool, or an older d9m's exec
// --name) stays in its cell in every Markdown table (found by audit: the status row's cells moved
// one stack to the right).
TEST(Report, MarkdownCellsHoldNamesThatLookLikeTableSyntax) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  CaseRecord rec{"", "exec:a|b\nc<i>", "process", "cpu", "out|put", "cid", "{}", 1, "inputs", "float32", "[4]"};
  rec.id = Store::case_id(rec);
  s.put_case(run, rec, CaseRunRecord{Status::nondeterministic, "", "unknown", "design", "why", "", 2, 2, 1000, 1000, "framework"},
             {{0, "a", 1000, std::nullopt}, {1, "b", 1000, DiffStats{1, 0.5, 3, 2}}});
  s.finish_run(run, "complete");
  const ReportData d = load_report_data(s);
  const std::string md = render_markdown(d, build_status_model(d));
  EXPECT_EQ(md.find("a|b"), std::string::npos) << md;
  EXPECT_EQ(md.find("<i>"), std::string::npos) << md;
  EXPECT_NE(md.find("| exec:a\\|b c&lt;i> | process |"), std::string::npos) << md;
  for (std::size_t at = 0; (at = md.find("exec:a", at)) != std::string::npos; ++at) {
    const std::size_t line = md.rfind('\n', at) + 1;
    EXPECT_EQ(md.compare(line, 2, "| "), 0) << "a name broke its row: " << md.substr(line, 80);
  }
}

// Between equally frequent digests a case's digest is its first trial's, whose values were
// checked, not the first in hex order (found by audit).
TEST(Report, ATieForTheMostFrequentDigestGoesToTheFirstTrial) {
  Fixture f;
  Store s = Store::open(f.path, Store::Mode::read_write);
  const std::string run = begin(s);
  put(s, run, "cpu.atomic", "nondeterministic", {"ff", "00", "ff", "00"});
  s.finish_run(run, "complete");
  const ReportData d = load_report_data(s);
  ASSERT_EQ(d.results.size(), 1u);
  EXPECT_EQ(d.results[0].digest, "ff");
}

}  // namespace
}  // namespace d9m

// A cost ratio far below 1 keeps its digits: an H200's atomic bf16 bias gradient took 27 ms where
// the ordered form took 0.11 ms, and "0.00x" read as a free or broken measurement.
TEST(Report, CostRatiosBelowATenthKeepTwoSignificantDigits) {
  EXPECT_EQ(d9m::format::ratio(1.1149), "1.11x");
  EXPECT_EQ(d9m::format::ratio(0.39), "0.39x");
  EXPECT_EQ(d9m::format::ratio(0.1), "0.10x");
  EXPECT_EQ(d9m::format::ratio(0.0039061), "0.0039x");
  EXPECT_EQ(d9m::format::ratio(0.00000123), "1.2e-06x");
  EXPECT_EQ(d9m::format::ratio(26.4), "26.40x");
}
