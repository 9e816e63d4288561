// Golden tests of every report format, rendered from a store written by hand with fixed ids,
// times and digests (two stacks, a nondeterministic variant, a broken claim, a skipped and an
// unsupported case, a cross-implementation claim, a case that ended in ERROR). The date, tool
// version and commit are normalised. D9M_UPDATE_GOLDEN=1 rewrites the files after a deliberate
// format change.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/core/fingerprint.h"
#include "harness/report/report.h"
#include "harness/store/store.h"
#include "source_dir.h"

namespace d9m {
namespace {

namespace fs = std::filesystem;

void put(Store& s, const std::string& run, const std::string& op, const std::string& variant, const std::string& claim,
         Status status, const std::vector<std::string>& digests, const std::string& bit_equal_to = "", const std::string& detail = "",
         const std::string& dtype = "f32") {
  const bool f32 = dtype == "f32";
  CaseRecord rec{"", op, variant, variant.rfind("cpu", 0) == 0 ? "cpu" : "cuda", f32 ? "small" : "small_" + dtype,
                 f32 ? "0123456789abcdef" : "fedcba9876543210", "{\"n\":2}", 7, "feedfacefeedfacefeedfacefeedface",
                 f32 ? "float32" : "float16", "[2,3]", dtype};
  rec.id = Store::case_id(rec);
  std::vector<TrialRecord> ts;
  for (std::size_t t = 0; t < digests.size(); ++t)
    ts.push_back({static_cast<std::int64_t>(t), digests[t], 1000 * static_cast<std::int64_t>(t + 1),
                  digests[t] == digests[0] ? std::nullopt : std::optional<DiffStats>(DiffStats{2, 0.25, 5, 1})});
  const std::set<std::string> distinct(digests.begin(), digests.end());
  CaseRunRecord cr{status, detail, claim, "design", "a reason, with \"quotes\" & <tags>", bit_equal_to,
                   static_cast<std::int64_t>(digests.size()), static_cast<std::int64_t>(distinct.size()),
                   digests.empty() ? std::nullopt : std::optional<std::int64_t>(2000),
                   digests.empty() ? std::nullopt : std::optional<std::int64_t>(1000),
                   variant == "cpu.atomic" ? "atomic" : variant == "cpu.serial" ? "reference" : variant.rfind("cudnn", 0) == 0 ? "vendor" : "ordered"};
  s.put_case(run, rec, cr, ts);
}

std::string golden_store(const std::string& path) {
  Store s = Store::open(path, Store::Mode::read_write);
  for (int k = 0; k < 2; ++k) {
    const nlohmann::json fp = {{"schema", "d9m.fingerprint/1"}, {"host", {{"cpu_model", "Test CPU"}, {"os", "TestOS"}, {"kernel", "Linux 1.0"}, {"glibc", "2.36"}}},
                               {"build", {{"compiler", "g++ 12"}}}, {"gpus", k ? nlohmann::json::array({{{"name", "Test GPU"}}}) : nlohmann::json::array()},
                               {"d9m", {{"version", "0.0.0"}, {"commit", "golden"}}}};
    RunInfo info{std::string(32, k ? 'b' : 'a'), "2026-01-0" + std::to_string(k + 1) + "T00:00:00Z", "host" + std::to_string(k),
                 "[]", "[\"d9m\",\"run\"]", "catalogdigest", 3, 2};
    const std::string run = s.begin_run(fingerprint_from_json(fp), info);
    put(s, run, "scatter_add", "cpu.atomic", "nondeterministic", Status::nondeterministic, {"d1", "d2", "d3"});
    put(s, run, "scatter_add", "cpu.serial", "deterministic", Status::deterministic, {"ds", "ds", "ds"});
    put(s, run, "scatter_add", "cpu.ordered", "deterministic", Status::deterministic, {"ds", "ds", "ds"}, "cpu.serial");
    put(s, run, "scatter_add", "cuda.ordered", "deterministic", k ? Status::deterministic : Status::skipped,
        k ? std::vector<std::string>{"dg", "dg", "dg"} : std::vector<std::string>{}, "cpu.serial", k ? "" : "no device");
    put(s, run, "scatter_add", "cudnn.algo1", "deterministic", Status::unsupported, {}, "", "cuDNN: not supported");
    // The same op at another precision: rows of its own ("scatter_add f16"), with a solution of its own.
    put(s, run, "scatter_add", "cpu.atomic", "nondeterministic", Status::nondeterministic, {"h1", "h2", "h1"}, "", "", "f16");
    put(s, run, "scatter_add", "cpu.ordered", "deterministic", Status::deterministic, {"hs", "hs", "hs"}, "cpu.serial", "", "f16");
    put(s, run, "bias_add_grad", "cpu.blocked", "deterministic", Status::nondeterministic, k ? std::vector<std::string>{"x", "y", "x"} : std::vector<std::string>{"x", "x", "x"});
    // Not certified on S1 (ERROR only), evidence on S2.
    put(s, run, "bias_add_grad", "cpu.flaky", "deterministic", k ? Status::deterministic : Status::error,
        k ? std::vector<std::string>{"f", "f", "f"} : std::vector<std::string>{}, "", k ? "" : "injected failure");
    s.finish_run(run, "complete");
  }
  return path;
}

std::string normalise(std::string text, const ReportData& d) {
  auto replace_all = [&](const std::string& from, const std::string& to) {
    if (from.empty()) return;
    for (std::size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size())) text.replace(p, from.size(), to);
  };
  replace_all(d.generated_at, "@DATE@");
  replace_all("d9m " + d9m_version() + " (" + d9m_commit() + ")", "d9m @VERSION@");
  replace_all("\"commit\": \"" + d9m_commit() + "\"", "\"commit\": \"@COMMIT@\"");
  replace_all("\"version\": \"" + d9m_version() + "\"", "\"version\": \"@VERSION@\"");
  return text;
}

void compare_golden(const std::string& name, const std::string& got) {
  const std::string path = test::source_path("suites/report/golden/" + name);
  if (std::getenv("D9M_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << got;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path << " is missing: run with D9M_UPDATE_GOLDEN=1 to create it";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str()) << "the " << name << " report changed; if on purpose, rerun with D9M_UPDATE_GOLDEN=1 and review the diff";
}

TEST(ReportGolden, EveryFormatMatchesItsGoldenFile) {
  const std::string path = (fs::temp_directory_path() / ("d9m_golden_" + std::to_string(::getpid()) + ".sqlite")).string();
  fs::remove(path);
  golden_store(path);
  {
    Store s = Store::open(path, Store::Mode::read_only);
    ReportData d = load_report_data(s);
    d.store_path = "golden.sqlite";
    d.generated_at = "2026-01-03T00:00:00Z";
    // The manifest's origin and times are random and current: fixed here, as the date is.
    d.evidence = {std::string(64, 'e'), {std::string(64, 'f')}};
    const StatusModel m = build_status_model(d);
    compare_golden("report.md", normalise(render_markdown(d, m), d));
    compare_golden("report.html", normalise(render_html(d, m), d));
    compare_golden("report.json", normalise(render_json(d, m), d));
    compare_golden("report.junit.xml", normalise(render_junit(d, m), d));
    compare_golden("report.csv", normalise(render_csv(d, m), d));
    const std::string audit = render_markdown(d, m, true);
    for (const char* section : {"## Identification", "## Procedure", "## Acceptance criteria", "## Runs", "## Fingerprints", "## Anomalies"})
      EXPECT_NE(audit.find(section), std::string::npos) << section;
    EXPECT_NE(audit.find("claim broken: bias_add_grad/small/cpu.blocked on S2"), std::string::npos) << audit;
  }
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
}

}  // namespace
}  // namespace d9m
