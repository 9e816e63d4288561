// What keeps evidence safe when things go wrong: migration of older stores after a backup, run
// leases (who is alive), a full disk in the middle of a run, network file systems.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/store/merge.h"
#include "harness/core/catalog.h"
#include "harness/core/fingerprint.h"
#include "harness/report/format.h"
#include "harness/report/report.h"
#include "harness/report/results.h"
#include "harness/exec/runner.h"
#include "harness/store/run_lease.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"
#include "scratch_dir.h"
#include "source_dir.h"

namespace d9m {
namespace {

namespace fs = std::filesystem;

// A schema-1 store made by d9m at commit 9f61748 (bias_add_grad, one config, cpu variants and
// the controls, 3 trials each), kept as the migration's input.
const std::string kSchema1Store = test::source_path("suites/store/v1-store.sqlite");

class StoreReliabilityTest : public test::ScratchDirTest {
 protected:
  StoreReliabilityTest() : ScratchDirTest("reliability") {}

  // Runs `sql` on the store file as anyone with SQLite would (foreign keys off), and leaves the
  // file whole: no log beside it.
  static void edit(const std::string& p, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    sql::exec(db, "PRAGMA foreign_keys = OFF; " + sql);
    sqlite3_close(db);
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(p + suffix);
  }

  static std::int64_t count(const Store& s, const std::string& sql) {
    sql::Statement st(s.db(), sql);
    return st.step() ? st.integer(0) : -1;
  }

  // Leaves in the store at `p` a run of `plan` that was stopped after storing the cases `stored`
  // (their rows copied from a complete run of them alone), as a killed `d9m run` leaves it.
  static void store_stopped_run(const std::string& p, const Catalog& cat, const std::vector<PlannedCase>& plan,
                                const std::vector<PlannedCase>& stored, const RunOptions& opt) {
    Store s = Store::open(p, Store::Mode::read_write);
    const RunSummary r = run_audit(cat, stored, s, opt);
    RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", cat.digest, opt.trials, 1, plan_digest(plan, opt.trials, 1)};
    s.begin_run(collect_fingerprint(probe_gpus()), info);
    // The stored cases, written into the run of the whole plan as the run writes them (their
    // chain links its own): a resume verifies the store first, so rows merely copied from the
    // other run, which broke its chain, would not resume.
    sql::Statement cases(s.db(),
                         "SELECT c.id, c.op, c.variant, c.backend, c.config, c.config_id, c.params, c.seed, c.input_digest,"
                         " c.output_dtype, c.output_shape, c.dtype, c.math, cr.status, cr.detail, cr.claim_determinism,"
                         " cr.claim_source, cr.claim_reason, cr.claim_bit_equal_to, cr.trials, cr.distinct_digests, cr.median_ns,"
                         " cr.min_ns, cr.role, cr.invariance, cr.value_check FROM case_runs cr JOIN cases c ON c.id = cr.case_id"
                         " WHERE cr.run_id = ? ORDER BY cr.seq");
    cases.bind(1, r.run_id);
    std::vector<std::pair<CaseRecord, CaseRunRecord>> rows;
    while (cases.step()) {
      CaseRecord c{cases.text(0), cases.text(1), cases.text(2), cases.text(3), cases.text(4), cases.text(5), cases.text(6),
                   static_cast<std::uint64_t>(cases.integer(7)), cases.text(8), cases.text(9), cases.text(10), cases.text(11),
                   cases.text(12)};
      CaseRunRecord cr{status_from_string(cases.text(13)), cases.text(14), cases.text(15), cases.text(16), cases.text(17),
                       cases.text(18), cases.integer(19), cases.integer(20),
                       cases.is_null(21) ? std::nullopt : std::optional<std::int64_t>(cases.integer(21)),
                       cases.is_null(22) ? std::nullopt : std::optional<std::int64_t>(cases.integer(22)), cases.text(23),
                       cases.text(24), cases.text(25)};
      rows.emplace_back(std::move(c), std::move(cr));
    }
    for (const auto& [c, cr] : rows) {
      sql::Statement t(s.db(), "SELECT trial, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, choice"
                               " FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial");
      t.bind(1, r.run_id).bind(2, c.id);
      std::vector<TrialRecord> trials;
      while (t.step())
        trials.push_back({t.integer(0), t.text(1), t.integer(2),
                          t.is_null(3) ? std::nullopt
                                       : std::optional<DiffStats>(DiffStats{t.integer(3), t.real(4), t.integer(5), t.integer(6)}),
                          t.text(7)});
      s.put_case(info.id, c, cr, trials);
    }
  }
};

// Every trial row as the trials table (schema 1-6) or view (schema 7) shows it, in key order: one
// SHA-256 over all of them (a choice is '' where a schema before 5 has none).
std::string trial_rows_digest(const Store& s) {
  sql::Statement t(s.db(), "SELECT run_id, case_id, trial, digest, elapsed_ns, quote(diff_count), quote(diff_max_abs),"
                           " quote(diff_max_ulp), quote(diff_first_index), chain, " +
                               std::string(s.schema_version() >= 5 ? "choice" : "''") + " FROM trials ORDER BY run_id, case_id, trial");
  std::string all;
  while (t.step())
    for (int c = 0; c < 11; ++c) all += t.text(c) + (c == 10 ? "\n" : "|");
  return sha256_hex(all);
}

// The JSON report of a store without what names the file and the moment (its path, when it was
// rendered, and the evidence digest, which a schema-2 store gains a manifest for on migrating).
std::string report_of(const Store& s) {
  const ReportData d = load_report_data(s);
  nlohmann::json j = nlohmann::json::parse(render_json(d, build_status_model(d)));
  for (const char* k : {"store", "generated_at", "evidence"}) j.erase(k);
  return j.dump(1);
}

// The H100 audit's store as committed (2026-11-23, written at schema 2): migrated to this schema it
// verifies, keeps every chain root, shows every trial row as before, and reports the same; merged
// into a new store, the same again. (Its evidence digest changes once, by design: migrating to
// schema 3 records its runs in a manifest. xz: the store is committed compressed.)
TEST_F(StoreReliabilityTest, TheCommittedH100StoreMigratesToTheCurrentSchemaWithEveryRowAndReportTheSame) {
  const std::string p = path("h100.sqlite");
  const std::string xz = test::source_path("reports/h100-2026-11-23/d9m.sqlite.xz");
  ASSERT_EQ(std::system(("xz -dc '" + xz + "' > '" + p + "'").c_str()), 0) << "cannot unpack " << xz;
  VerifyReport before;
  std::string rows_before, report_before;
  std::int64_t trials = 0;
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    ASSERT_EQ(s.schema_version(), 2);
    before = verify_store(s);
    ASSERT_TRUE(before.problems.empty()) << before.problems.front();
    rows_before = trial_rows_digest(s);
    trials = count(s, "SELECT count(*) FROM trials");
    report_before = report_of(s);
  }
  ASSERT_GT(trials, 10000);
  auto same = [&](const Store& s, const std::string& what) {
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << what << ": " << (v.problems.empty() ? "" : v.problems.front());
    EXPECT_EQ(v.chain_roots, before.chain_roots) << what;
    EXPECT_EQ(v.trials, before.trials) << what;
    EXPECT_EQ(trial_rows_digest(s), rows_before) << what << ": a trial row changed";
    EXPECT_EQ(count(s, "SELECT count(*) FROM trial_rows WHERE typeof(digest) = 'blob' AND typeof(chain) = 'blob'"), trials) << what;
    EXPECT_EQ(report_of(s), report_before) << what << ": the report changed";
  };
  {
    const Store s = Store::open(p, Store::Mode::read_write);
    EXPECT_EQ(s.schema_version(), kStoreSchemaVersion);
    EXPECT_NE(s.notice().find("migrated from schema 2 to " + std::to_string(kStoreSchemaVersion)), std::string::npos) << s.notice();
    same(s, "migrated");
  }
  const std::string merged = path("merged.sqlite");
  merge_stores(merged, {p + ".schema2-backup"});
  const Store m = Store::open(merged, Store::Mode::read_only);
  same(m, "merged from the store as committed");
}

// Trial rows schema 7 cannot key (an edited store: their case row deleted) are not dropped by the
// migration: it is refused, the store stays as it was with no backup left, and it still reads.
TEST_F(StoreReliabilityTest, AMigrationThatWouldDropTrialRowsIsRefusedAndChangesNothing) {
  const std::string p = path("old.sqlite");
  fs::copy_file(kSchema1Store, p);
  edit(p, "DELETE FROM case_runs WHERE rowid = (SELECT min(rowid) FROM case_runs)");
  const std::string before = contents(p);
  try {
    Store::open(p, Store::Mode::read_write);
    ADD_FAILURE() << "migrated a store whose trial rows it would drop";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::environment);
    EXPECT_NE(std::string(e.what()).find("holds 3 trial row(s) that belong to no case row"), std::string::npos) << e.what();
  }
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(p + suffix);
  EXPECT_EQ(contents(p), before);
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().string().find("backup"), std::string::npos) << e.path();
  const Store s = Store::open(p, Store::Mode::read_only);
  EXPECT_FALSE(verify_store(s).problems.empty());
}

// What an edit may have made of an older store that verified: rowids of zero or below (migration
// numbers case rows 1, 2, ... whatever their rowids), and a merge of such a store; and a digest
// stored as bytes (a type fault verify shows before, which migration must not turn into a valid
// value: it is refused).
TEST_F(StoreReliabilityTest, MigrationAndMergeNumberCaseRowsWhateverTheirRowidsAndRefuseRetypedDigests) {
  const std::string p = path("old.sqlite");
  fs::copy_file(kSchema1Store, p);
  edit(p, "UPDATE case_runs SET rowid = -7 WHERE rowid = 3; UPDATE case_runs SET rowid = 0 WHERE rowid = 4");
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    ASSERT_TRUE(verify_store(s).problems.empty()) << verify_store(s).problems.front();
  }
  const std::string merged = path("merged.sqlite");
  merge_stores(merged, {p});
  {
    const Store m = Store::open(merged, Store::Mode::read_only);
    EXPECT_TRUE(verify_store(m).problems.empty()) << verify_store(m).problems.front();
  }
  {
    const Store s = Store::open(p, Store::Mode::read_write);
    EXPECT_EQ(count(s, "SELECT count(*) FROM case_runs WHERE num BETWEEN 1 AND 5"), 5);
    EXPECT_TRUE(verify_store(s).problems.empty()) << verify_store(s).problems.front();
  }
  const std::string retyped = path("retyped.sqlite");
  fs::copy_file(kSchema1Store, retyped);
  edit(retyped, "UPDATE trials SET digest = CAST(digest AS BLOB) WHERE trial = 1");
  try {
    Store::open(retyped, Store::Mode::read_write);
    ADD_FAILURE() << "migrated a store with digests stored as bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a digest or link that is not text"), std::string::npos) << e.what();
  }
}

TEST_F(StoreReliabilityTest, ASchema1StoreIsReadAsItIsAndMigratedForwardAfterABackup) {
  const std::string p = path("old.sqlite");
  fs::copy_file(kSchema1Store, p);
  const std::string original = contents(p);
  std::vector<std::string> roots_before;
  {
    // Read-only: no migration, nothing written, yet every reader works.
    Store s = Store::open(p, Store::Mode::read_only);
    EXPECT_EQ(s.schema_version(), 1);
    const ReportData d = load_report_data(s);
    EXPECT_EQ(d.runs, 1);
    EXPECT_EQ(d.results.size(), 5u);
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << v.problems.front();
    roots_before = v.chain_roots;
  }
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(p + suffix);
  EXPECT_EQ(contents(p), original) << "a read-only open changed the file";

  {
    Store s = Store::open(p, Store::Mode::read_write);
    EXPECT_EQ(s.schema_version(), kStoreSchemaVersion);
    EXPECT_NE(s.notice().find("migrated from schema 1 to " + std::to_string(kStoreSchemaVersion)), std::string::npos) << s.notice();
    EXPECT_EQ(count(s, "PRAGMA user_version"), kStoreSchemaVersion);
    EXPECT_EQ(count(s, "SELECT count(*) FROM runs WHERE resumes = 0 AND plan_digest = ''"), 1);
    EXPECT_EQ(count(s, "SELECT count(*) FROM case_runs WHERE role = ''"), 5);  // the rows as written: no role
    // Read back, the old rows have the roles of the variants they name.
    for (const auto& r : load_report_data(s).results) EXPECT_NE(r.role, Role::unset) << r.variant;
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty());
    EXPECT_EQ(v.chain_roots, roots_before) << "migration changed the evidence";
  }
  // The backup is the schema-1 store with every row.
  const std::string backup = p + ".schema1-backup";
  ASSERT_TRUE(fs::exists(backup));
  {
    Store b = Store::open(backup, Store::Mode::read_only);
    EXPECT_EQ(b.schema_version(), 1);
    EXPECT_EQ(count(b, "SELECT count(*) FROM trials"), 15);
    EXPECT_EQ(count(b, "SELECT count(*) FROM case_runs"), 5);
  }
  // Opening again migrates nothing and makes no second backup.
  {
    Store s = Store::open(p, Store::Mode::read_write);
    EXPECT_TRUE(s.notice().empty());
  }
  std::size_t backups = 0;
  for (const auto& e : fs::directory_iterator(dir_)) backups += e.path().string().find("backup") != std::string::npos;
  EXPECT_EQ(backups, 1u);
}

TEST_F(StoreReliabilityTest, MergeTakesASchema1SourceWithTheDefaultsOfTheNewColumns) {
  const std::string src = path("old.sqlite");
  fs::copy_file(kSchema1Store, src);
  const MergeSummary m = merge_stores(path("merged.sqlite"), {src});
  EXPECT_EQ(m.added, 1 + 1 + 5 + 5 + 15);  // fingerprint, run, cases, case rows, trials
  Store s = Store::open(path("merged.sqlite"), Store::Mode::read_only);
  EXPECT_EQ(s.schema_version(), kStoreSchemaVersion);
  EXPECT_EQ(count(s, "SELECT count(*) FROM runs WHERE resumes = 0 AND plan_digest = ''"), 1);
  EXPECT_EQ(count(s, "SELECT count(*) FROM case_runs WHERE role = ''"), 5);
  EXPECT_TRUE(verify_store(s).problems.empty());
  EXPECT_FALSE(fs::exists(src + ".schema1-backup")) << "merge must not migrate (or touch) its inputs";
}

TEST_F(StoreReliabilityTest, ARunLeaseIsHeldExactlyWhileItsProcessLives) {
  const std::string store = path("s.sqlite");
  const std::string run = "0123456789abcdef0123456789abcdef";
  EXPECT_FALSE(RunLease::taken(store, run)) << "no lease file: nobody holds anything";
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunLease lease;
    const char ok = lease.acquire(store, run) ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    char c;
    (void)!::read(release[0], &c, 1);
    std::_Exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_TRUE(RunLease::taken(store, run));
  EXPECT_FALSE(RunLease::taken(store, "fedcba9876543210fedcba9876543210")) << "another run's lease is another byte";
  RunLease mine;
  EXPECT_FALSE(mine.acquire(store, run)) << "two holders of one lease";
  ::kill(child, SIGKILL);  // dies without releasing anything: the kernel drops the lock
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_FALSE(RunLease::taken(store, run));
  EXPECT_TRUE(mine.acquire(store, run));
  EXPECT_TRUE(RunLease::taken(store, run)) << "a second descriptor in the holder's process must see it too";
}

// A run whose process died is interrupted on the next write, its chain closed at the last stored
// row; it can then be resumed, and the chain goes on.
TEST_F(StoreReliabilityTest, ADeadRunIsMarkedInterruptedAndResumes) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"test", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 2, 1, "plan"};
  CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg", "cid", "{}", 1, "in", "float32", "[1]"};
  c.id = Store::case_id(c);
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 2, 1, 10, 10};
  {
    Store s = Store::open(p, Store::Mode::read_write);
    s.begin_run(fp, info);
    s.put_case(info.id, c, cr, {{0, "aa", 10, std::nullopt}, {1, "aa", 10, std::nullopt}});
    // The process "dies" here: the Store goes away without finish_run (its lease with it).
  }
  {
    Store s = Store::open(p, Store::Mode::read_only);
    EXPECT_EQ(load_report_data(s).run_rows.at(0).state, "interrupted") << "readers see the dead run at once";
  }
  {
    Store s = Store::open(p, Store::Mode::read_write);
    EXPECT_EQ(count(s, "SELECT count(*) FROM runs WHERE state = 'interrupted' AND chain_root IS NOT NULL"), 1);
    EXPECT_TRUE(verify_store(s).problems.empty());
    RunInfo other = info;
    other.plan_digest = "another plan";
    EXPECT_FALSE(s.resume_run(fp, other)) << "resumed a run of another plan";
    const auto r = s.resume_run(fp, info);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->id, info.id);
    EXPECT_EQ(r->resumes, 1);
    ASSERT_EQ(r->done.size(), 1u);
    EXPECT_EQ(r->done[0].variant, "cpu.serial");
    CaseRecord c2 = c;
    c2.config = "cfg2";
    c2.id = Store::case_id(c2);
    s.put_case(info.id, c2, cr, {{0, "bb", 10, std::nullopt}, {1, "bb", 10, std::nullopt}});
    s.finish_run(info.id, "complete");
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << v.problems.front();
    EXPECT_EQ(count(s, "SELECT resumes FROM runs"), 1);
    EXPECT_EQ(count(s, "SELECT count(*) FROM case_runs"), 2);
  }
}

// A live run's lease is held in the store's real file, so no other writer can declare the run
// dead or take it over, whatever name (path or symlink) it opened the store by. (OFD locks
// conflict between descriptions even within one process, so one process can play both sides.)
TEST_F(StoreReliabilityTest, ALiveRunIsNeverReapedOrTakenOverWhateverNameTheStoreIsOpenedBy) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"test", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 2, 1, "plan"};
  Store live = Store::open(p, Store::Mode::read_write);
  live.begin_run(fp, info);
  fs::create_symlink(p, path("link.sqlite"));
  for (const std::string& name : {p, path("link.sqlite")}) {
    Store other = Store::open(name, Store::Mode::read_write);  // its open looks for dead runs
    EXPECT_EQ(count(other, "SELECT count(*) FROM runs WHERE state = 'running'"), 1) << "reaped a live run via " << name;
    EXPECT_TRUE(other.run_alive(info.id)) << name;
    EXPECT_FALSE(other.resume_run(fp, info)) << "took over a live run via " << name;
  }
  live.finish_run(info.id, "complete");
  Store s = Store::open(p, Store::Mode::read_only);
  EXPECT_EQ(count(s, "SELECT count(*) FROM runs WHERE state = 'complete'"), 1);
}

// merge replaces its output by a rename: never while a run is still writing into it.
TEST_F(StoreReliabilityTest, MergeRefusesAnOutputARunIsStillWritingInto) {
  const std::string p = path("s.sqlite");
  fs::copy_file(kSchema1Store, path("in.sqlite"));
  Store live = Store::open(p, Store::Mode::read_write);
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 2, 1, "plan"};
  live.begin_run(fingerprint_from_json({{"test", 1}}), info);
  try {
    merge_stores(p, {path("in.sqlite")});
    ADD_FAILURE() << "merged into a store with a live run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is still writing into it"), std::string::npos) << e.what();
  }
  live.finish_run(info.id, "complete");
  EXPECT_NO_THROW(merge_stores(p, {path("in.sqlite")}));
}

// A run that opened OUT before `d9m merge -o OUT` renamed its result over it, and began only
// after (found by review: the run's process was slowed between opening the store and taking its
// lease), wrote every case into the replaced file, said "6 cases into OUT" and exited 0; OUT held
// none of them. Writes now stop, loudly, once the path names another file.
TEST_F(StoreReliabilityTest, AStoreReplacedByAMergeAfterItWasOpenedIsNotWrittenIntoUnseen) {
  const std::string p = path("s.sqlite");
  { Store made = Store::open(p, Store::Mode::read_write); }
  Store early = Store::open(p, Store::Mode::read_write);  // opened before the merge
  merge_stores(p, {kSchema1Store});                         // renames its result over p
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 2, 1, "plan"};
  try {
    early.begin_run(fingerprint_from_json({{"test", 1}}), info);
    ADD_FAILURE() << "began a run in the file the merge replaced";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::environment);
    EXPECT_NE(std::string(e.what()).find("the store file was replaced after this process opened it"), std::string::npos) << e.what();
  }
  const Store now = Store::open(p, Store::Mode::read_only);
  EXPECT_EQ(count(now, "SELECT count(*) FROM runs WHERE id = '" + info.id + "'"), 0);
}

// Ending a run never overwrites what another process decided about it.
TEST_F(StoreReliabilityTest, FinishingARunSomeoneElseMarkedIsAnErrorNotAnOverwrite) {
  const std::string p = path("s.sqlite");
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 2, 1, "plan"};
  Store s = Store::open(p, Store::Mode::read_write);
  s.begin_run(fingerprint_from_json({{"test", 1}}), info);
  sql::exec(s.db(), "UPDATE runs SET state = 'interrupted'");
  try {
    s.finish_run(info.id, "complete");
    ADD_FAILURE() << "finish_run overwrote another process's state";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no longer marked running"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count(s, "SELECT count(*) FROM runs WHERE state = 'interrupted'"), 1);
}

// Processes opening a schema-1 store at once: all succeed, one migrates, one backup remains.
TEST_F(StoreReliabilityTest, ConcurrentOpenersOfASchema1StoreAllSucceed) {
  const std::string p = path("old.sqlite");
  fs::copy_file(kSchema1Store, p);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    const pid_t c = ::fork();
    ASSERT_GE(c, 0);
    if (c == 0) {
      try {
        Store s = Store::open(p, Store::Mode::read_write);
        std::_Exit(s.schema_version() == kStoreSchemaVersion ? 0 : 2);
      } catch (const std::exception&) {
        std::_Exit(1);
      }
    }
    children.push_back(c);
  }
  for (pid_t c : children) {
    int st = 0;
    ::waitpid(c, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "an opener failed (status " << st << ")";
  }
  std::size_t backups = 0, partial = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    backups += e.path().string().find("-backup") != std::string::npos;
    partial += e.path().string().find(".partial") != std::string::npos;
  }
  EXPECT_EQ(backups, 1u);
  EXPECT_EQ(partial, 0u);
}

// --resume keys stored cases by config name: two configs with the same parameters (one
// config_id) are two cases, and resuming after the first runs the second.
TEST_F(StoreReliabilityTest, ResumingRunsTheCasesOfConfigsThatShareTheirParameters) {
  const Catalog cat = parse_catalog(R"({"schema": "d9m.catalog/1", "configs": [
      {"op": "bias_add_grad", "name": "a", "params": {"n": 1, "h": 2, "w": 2, "c": 4}, "variants": ["cpu.serial"]},
      {"op": "bias_add_grad", "name": "b", "params": {"n": 1, "h": 2, "w": 2, "c": 4}, "variants": ["cpu.serial"]}]})",
                                    "same.json", Registry::global());
  ASSERT_EQ(cat.configs[0].config_id, cat.configs[1].config_id);
  const auto cases = plan_cases(cat, Registry::global(), Selection{});
  ASSERT_EQ(cases.size(), 2u);
  RunOptions opt;
  opt.trials = 2;
  opt.canaries = false;
  const std::string p = path("s.sqlite");
  store_stopped_run(p, cat, cases, {cases[0]}, opt);  // stored case "a" only
  Store s = Store::open(p, Store::Mode::read_write);
  opt.resume = true;
  const RunSummary r = run_audit(cat, cases, s, opt);
  EXPECT_EQ(r.resumes, 1);
  EXPECT_EQ(r.resumed_cases, 1);
  EXPECT_EQ(r.cases, 2);
  EXPECT_EQ(count(s, "SELECT count(*) FROM case_runs cr JOIN cases c ON c.id = cr.case_id WHERE c.config = 'b' AND cr.run_id = '" +
                        r.run_id + "'"),
            1)
      << "config b was skipped as if it were a";
}

// A run stopped inside a config, after its cpu.serial case was stored, resumes with the same
// evidence as a run that never stopped, wherever it stopped: the stored serial case runs again,
// unstored, so the rest are checked against its output (before: against a reference cpu.gather
// computed for them), and each check's computed reference (at bf16, the one in f64) is the one
// the order of an unstopped run gives. With --save-outputs the config's inputs and every output
// are written (the reference's run again saves the inputs, as the first request of a config does).
TEST_F(StoreReliabilityTest, AResumedRunHasTheEvidenceOfARunThatNeverStoppedWhereverItStopped) {
  const Catalog cat = parse_catalog(R"({"schema": "d9m.catalog/1", "configs": [
      {"op": "conv2d_bwd_filter", "name": "f", "params": {"n": 2, "h": 9, "w": 9, "ci": 3, "co": 4, "kh": 3, "kw": 3}},
      {"op": "conv2d_bwd_filter", "name": "fb", "dtype": "bf16", "params": {"n": 2, "h": 9, "w": 9, "ci": 3, "co": 4, "kh": 3, "kw": 3}}]})",
                                    "stop.json", Registry::global());
  Selection cpu;  // a CUDA build has the GPU variants too, which cannot run here
  cpu.backend = "cpu";
  const auto cases = plan_cases(cat, Registry::global(), cpu);
  ASSERT_EQ(cases.size(), 8u);
  ASSERT_EQ(cases[0].variant->name, "cpu.serial") << "the reference runs first in its config";
  RunOptions opt;
  opt.trials = 2;
  opt.canaries = false;
  auto values_of = [](const Store& s, const std::string& run) {
    std::map<std::string, std::string> out;
    for (const auto& r : load_report_data(s, run).results) out[r.config + "/" + r.variant] = format::values_text(r.values);
    return out;
  };
  std::map<std::string, std::string> unstopped;
  {
    Store s = Store::open(path("full.sqlite"), Store::Mode::read_write);
    unstopped = values_of(s, run_audit(cat, cases, s, opt).run_id);
  }
  EXPECT_EQ(unstopped.at("f/cpu.atomic").find("agrees with cpu.serial ("), 0u) << unstopped.at("f/cpu.atomic");
  for (std::size_t stored = 1; stored < cases.size(); ++stored) {
    SCOPED_TRACE("stopped after " + std::to_string(stored) + " cases");
    const std::string p = path("s" + std::to_string(stored) + ".sqlite");
    store_stopped_run(p, cat, cases, std::vector<PlannedCase>(cases.begin(), cases.begin() + static_cast<std::ptrdiff_t>(stored)), opt);
    Store s = Store::open(p, Store::Mode::read_write);
    RunOptions resume = opt;
    resume.resume = true;
    const std::string outputs = path("outputs" + std::to_string(stored));
    resume.save_outputs = outputs;
    const RunSummary r = run_audit(cat, cases, s, resume);
    ASSERT_EQ(r.resumed_cases, static_cast<std::int64_t>(stored));
    EXPECT_EQ(values_of(s, r.run_id), unstopped);
    for (std::size_t i = stored; i < cases.size(); ++i) {
      const std::string dir = outputs + "/conv2d_bwd_filter/" + cases[i].config->name;
      EXPECT_TRUE(fs::exists(dir + "/" + cases[i].variant->name + ".npy")) << dir << "/" << cases[i].variant->name;
      EXPECT_TRUE(fs::exists(dir + "/inputs")) << dir;
    }
  }
}

// A full disk in the middle of a run (SQLite's max_page_count stands in for it): the case that
// did not fit is an environment error naming the problem, nothing half-written stays, every
// earlier case and its chain verify, and the run can be resumed once there is room.
TEST_F(StoreReliabilityTest, AFullDiskLosesNothingAndLeavesNothingHalfWritten) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"test", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 200, 1, "plan"};
  std::vector<TrialRecord> trials;
  for (std::int64_t t = 0; t < 200; ++t) trials.push_back({t, "0123456789abcdef0123456789abcdef", 1000 + t, std::nullopt});
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 200, 1, 1000, 1000};
  std::int64_t stored = 0;
  std::string error;
  {
    Store s = Store::open(p, Store::Mode::read_write);
    s.begin_run(fp, info);
    sql::exec(s.db(), "PRAGMA max_page_count = " + std::to_string(count(s, "PRAGMA page_count") + 40));
    try {
      for (int i = 0; i < 1000; ++i) {
        CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg" + std::to_string(i), "cid", "{}", 1, "in", "float32", "[1]"};
        c.id = Store::case_id(c);
        s.put_case(info.id, c, cr, trials);
        ++stored;
      }
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::environment);
      error = e.what();
    }
  }
  ASSERT_FALSE(error.empty()) << "the store never filled up";
  EXPECT_GT(stored, 0);
  EXPECT_NE(error.find("full"), std::string::npos) << error;
  EXPECT_NE(error.find("cfg" + std::to_string(stored)), std::string::npos) << "the message names the case: " << error;
  {
    Store s = Store::open(p, Store::Mode::read_only);
    EXPECT_EQ(count(s, "SELECT count(*) FROM case_runs"), stored);
    EXPECT_EQ(count(s, "SELECT count(*) FROM trials"), stored * 200) << "a half-written case";
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  }
  Store s = Store::open(p, Store::Mode::read_write);  // room again (no page limit): resume
  const auto r = s.resume_run(fp, info);
  ASSERT_TRUE(r);
  EXPECT_EQ(static_cast<std::int64_t>(r->done.size()), stored);
}

// The hash chain's hot path writes trial rows without nlohmann::json; it must stay byte for byte
// the general definition, or every chain link (and every stored root) would change.
TEST(ChainRows, TheFastTrialRowIsExactlyTheGeneralOne) {
  const std::string run = random_run_id();
  const std::int64_t ints[] = {0, 1, -1, 9, 10, 199, 123456789012LL, INT64_MAX, INT64_MIN};
  const std::string digests[] = {"0123456789abcdef0123456789abcdef", "", "ABC-def_1.2", "a\"b", "caf\xc3\xa9", "\xff", "x y"};
  int checked = 0;
  for (std::int64_t trial : ints)
    for (std::int64_t ns : ints)
      for (const auto& d : digests)
        for (const std::string& cs : {std::string("9f3c"), std::string("id with space"), std::string("\n")}) {
          const TrialRecord t{trial, d, ns, std::nullopt};
          EXPECT_EQ(Store::canonical_trial(run, cs, t), Store::canonical_trial_general(run, cs, t));
          ++checked;
        }
  // Rows with a diff (nearly every row of a nondeterministic case) and with a choice take the
  // fast path too: its doubles must come out as nlohmann writes them, whatever the value.
  const double doubles[] = {0.0, -0.0, 0.5, 1.0, -1.0, 3.0, 1e-300, 4.9e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                            0.1, 1.0 / 3.0, 123456789.0, 1e21, 1e22, 9007199254740993.0, 6.103515625e-05, 65504.0, 3.4028234663852886e38,
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
  const std::string choices[] = {"", "algo1", "engine_12", "a\"b", "x y", "caf\xc3\xa9"};
  std::mt19937_64 rng(7);
  std::vector<double> values(std::begin(doubles), std::end(doubles));
  for (int i = 0; i < 2000; ++i) {  // and random bit patterns: every exponent, every mantissa
    const std::uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    values.push_back(d);
  }
  int with_diff = 0;
  for (double v : values)
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, INT64_MAX, INT64_MIN})
      for (const auto& choice : choices) {
        TrialRecord t{3, "aa", 5, DiffStats{n, v, n == INT64_MIN ? INT64_MAX : -n, 11}};  // (-INT64_MIN overflows)
        t.choice = choice;
        ASSERT_EQ(Store::canonical_trial(run, "c", t), Store::canonical_trial_general(run, "c", t)) << v << " " << n << " " << choice;
        ++with_diff;
      }
  EXPECT_EQ(Store::canonical_trial("r", "c", {2, "ab", 7, std::nullopt}), R"(["trial","r","c",2,"ab",7,null])");
  EXPECT_EQ(Store::canonical_trial("r", "c", {2, "ab", 7, DiffStats{3, 0.5, 7, 11}}), R"(["trial","r","c",2,"ab",7,[3,0.5,7,11]])");
  EXPECT_EQ(Store::canonical_trial("r", "c", {2, "ab", 7, DiffStats{3, 2.0, 7, 11}}), R"(["trial","r","c",2,"ab",7,[3,2.0,7,11]])");
  EXPECT_GT(checked, 500);
  EXPECT_GT(with_diff, 40000);
}

TEST(ChainRows, ALinkIsTheSha256OfThePreviousLinkANewlineAndTheRow) {
  EXPECT_EQ(Store::chain_link("abc", "row"), sha256_hex(std::string("abc\nrow")));
  EXPECT_EQ(sha256_hex(std::string("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("ab", "c"), sha256_hex(std::string("abc")));
}

TEST(NetworkFilesystems, AreNamedAndLocalOnesAreNot) {
  EXPECT_EQ(network_filesystem_name(0x6969), "NFS");
  EXPECT_EQ(network_filesystem_name(0xff534d42), "CIFS");
  EXPECT_EQ(network_filesystem_name(0xfe534d42), "SMB2");
  EXPECT_EQ(network_filesystem_name(0x00c36400), "CephFS");
  EXPECT_EQ(network_filesystem_name(0xef53), std::nullopt);      // ext4
  EXPECT_EQ(network_filesystem_name(0x58465342), std::nullopt);  // XFS
  EXPECT_EQ(network_filesystem_name(0x01021994), std::nullopt);  // tmpfs
  EXPECT_EQ(network_filesystem_name(0x794c7630), std::nullopt);  // overlayfs
}

}  // namespace
}  // namespace d9m
